"""CCR (compress, cache, retrieve): the original of every compressed piece, kept under its hash.

A compressed chunk ends with ``<!-- CCR:<hash> -->``; ``GET /memory/ccr/<hash>`` hands the original back.
Each entry records the project it came from so the API can apply that project's authorisation. The hash
is the sha256 of the project name and the original (domain-separated), so the same text seen in two
projects gives two entries and one project's put never re-labels another project's entry.

The key is the first 96 bits of that sha256 written as 29 decimal digits (zero-padded). The marker then
costs exactly 15 cl100k_base tokens (cl100k and o200k bill three digits a token), against 18.6 on average
and up to 25 for the same 96 bits as 24 hex digits, whose letters and digits are separate pre-tokens, and
41 for all 64 hex digits (docs/optimizer.md, "Token counts"). Digits are also case-free, safe in URLs and
shells, and not taken for a SHA by the aligner when a marker sits inside a log. 96 bits are plenty for a
store of at most ``MEM_CCR_MAX_ENTRIES`` live entries: the chance that any two of n entries collide is
about n^2 / 2^97, 6e-24 for the default 1000 (6e-18 for a million). The key is not a security boundary
either: authorisation is the entry's project, checked on every read.

Two stores: in-process (LRU capacity plus TTL, via cachetools) and Redis (shared by every API replica),
chosen by :func:`get_ccr_store` from ``MEM_REDIS_URL``.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cachetools import TTLCache

from shared.config import Settings

CCR_HASH_BITS = 96  # of the sha256; see the module docstring for the collision odds
CCR_HASH_DIGITS = len(str(2**CCR_HASH_BITS - 1))  # 29 decimal digits
CCR_MARKER_RE = re.compile(rf"<!-- CCR:([0-9]{{{CCR_HASH_DIGITS}}}) -->")
_HASH_RE = re.compile(rf"[0-9]{{{CCR_HASH_DIGITS}}}")


class CCRUnavailable(RuntimeError):
    """The CCR store cannot be reached (Redis down); the caller degrades instead of failing."""


@dataclass(frozen=True)
class CCREntry:
    """One stored original: the text, the project it came from and when it was stored (unix seconds)."""

    original: str
    project: str | None
    created_at: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for the API."""
        return {"original": self.original, "project": self.project, "created_at": self.created_at}


def ccr_hash(original: str, project: str | None = None) -> str:
    """The key of ``original`` in the store: the first 96 bits of the sha256 over the project name, a
    NUL and the UTF-8 text, as 29 decimal digits."""
    digest = hashlib.sha256()
    digest.update((project or "").encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(original.encode("utf-8", "surrogatepass"))
    value = int.from_bytes(digest.digest()[: CCR_HASH_BITS // 8], "big")
    return str(value).zfill(CCR_HASH_DIGITS)


def ccr_marker(hash_: str) -> str:
    """The marker a compressed piece carries."""
    return f"<!-- CCR:{hash_} -->"


def is_ccr_hash(value: str) -> bool:
    """True when ``value`` has the shape of a CCR hash: exactly 29 decimal digits (ASCII)."""
    return isinstance(value, str) and _HASH_RE.fullmatch(value) is not None


@runtime_checkable
class CCRStore(Protocol):
    """Where originals live until they expire or are evicted."""

    def put(self, original: str, *, project: str | None = None) -> str:
        """Store ``original`` and return its hash (storing the same text again refreshes it)."""
        ...

    def get(self, hash_: str) -> CCREntry | None:
        """The entry under ``hash_``, or None when it is unknown, expired or evicted."""
        ...


class MemoryCCRStore:
    """In-process store: at most ``max_entries`` originals, least recently used evicted first, each kept
    ``ttl_secs`` from its last put. ``timer`` is injectable so tests can move time without sleeping."""

    def __init__(self, max_entries: int = 1000, ttl_secs: float = 3600, *,
                 timer: Callable[[], float] = time.monotonic, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1 or ttl_secs <= 0:
            raise ValueError("CCR store needs max_entries >= 1 and ttl_secs > 0")
        self._cache: TTLCache[str, CCREntry] = TTLCache(maxsize=max_entries, ttl=ttl_secs, timer=timer)
        self._clock = clock
        self._lock = threading.Lock()  # cachetools caches are not thread-safe; the API serves in threads

    def put(self, original: str, *, project: str | None = None) -> str:
        """Store ``original`` for ``project`` and return its hash."""
        key = ccr_hash(original, project)
        with self._lock:
            self._cache[key] = CCREntry(original, project, self._clock())
        return key

    def get(self, hash_: str) -> CCREntry | None:
        """The entry under ``hash_`` (a hit makes it most recently used), or None."""
        with self._lock:
            return self._cache.get(hash_)

    def __len__(self) -> int:
        with self._lock:
            self._cache.expire()
            return len(self._cache)


# Store, index, evict in one round trip and atomically, so replicas putting at once cannot overshoot
# the capacity. The index is a sorted set scored by last use; members older than the TTL are dropped
# from it first (their hashes have already expired), then the least recently used beyond capacity.
_PUT_SCRIPT = """
local key, index = KEYS[1], KEYS[2]
local hash, original, project, created, now, ttl, cap = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('DEL', key)
redis.call('HSET', key, 'original', original, 'project', project, 'created_at', created)
redis.call('EXPIRE', key, ttl)
redis.call('ZADD', index, now, hash)
redis.call('ZREMRANGEBYSCORE', index, '-inf', now - ttl)
local extra = redis.call('ZCARD', index) - cap
if extra > 0 then
  local victims = redis.call('ZPOPMIN', index, extra)
  for i = 1, #victims, 2 do
    redis.call('DEL', ARGV[8] .. victims[i])
  end
end
return 1
"""

_GET_SCRIPT = """
local key, index = KEYS[1], KEYS[2]
local values = redis.call('HMGET', key, 'original', 'project', 'created_at')
if not values[1] then
  redis.call('ZREM', index, ARGV[1])
  return false
end
redis.call('ZADD', index, 'XX', tonumber(ARGV[2]), ARGV[1])
return values
"""


class RedisCCRStore:
    """Redis store shared by every API replica: one hash per original (``<prefix>e:<hash>``) with a TTL,
    and a sorted set ``<prefix>lru`` that bounds the number of entries, least recently used out first."""

    def __init__(self, client: object, *, max_entries: int = 1000, ttl_secs: int = 3600,
                 prefix: str = "mem:ccr:", clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1 or ttl_secs < 1:
            raise ValueError("CCR store needs max_entries >= 1 and ttl_secs >= 1")
        self._client = client
        self._max_entries = max_entries
        self._ttl = int(ttl_secs)
        self._prefix = prefix
        self._clock = clock
        self._put = client.register_script(_PUT_SCRIPT)  # type: ignore[attr-defined]
        self._get = client.register_script(_GET_SCRIPT)  # type: ignore[attr-defined]

    @classmethod
    def from_url(cls, url: str, *, max_entries: int = 1000, ttl_secs: int = 3600,
                 prefix: str = "mem:ccr:") -> RedisCCRStore:
        """A store on the Redis at ``url`` (short timeouts: a slow Redis must not stall a request)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # One retry, no backoff: when Redis is down the chunk goes out without a marker, fast.
        client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0,
                                      retry=Retry(NoBackoff(), 1))
        return cls(client, max_entries=max_entries, ttl_secs=ttl_secs, prefix=prefix)

    def _entry_key(self, hash_: str) -> str:
        return f"{self._prefix}e:{hash_}"

    def put(self, original: str, *, project: str | None = None) -> str:
        """Store ``original`` for ``project`` and return its hash; raises :class:`CCRUnavailable`."""
        import redis

        key = ccr_hash(original, project)
        now = self._clock()
        try:
            self._put(
                keys=[self._entry_key(key), f"{self._prefix}lru"],
                args=[key, original.encode("utf-8", "surrogatepass"), project or "", repr(now), now,
                      self._ttl, self._max_entries, f"{self._prefix}e:"],
            )
        except redis.RedisError as exc:
            raise CCRUnavailable(f"CCR store unreachable: {exc}") from exc
        return key

    def get(self, hash_: str) -> CCREntry | None:
        """The entry under ``hash_``, or None; raises :class:`CCRUnavailable` when Redis is unreachable."""
        import redis

        if not is_ccr_hash(hash_):
            return None
        try:
            values = self._get(keys=[self._entry_key(hash_), f"{self._prefix}lru"], args=[hash_, self._clock()])
        except redis.RedisError as exc:
            raise CCRUnavailable(f"CCR store unreachable: {exc}") from exc
        if not values:
            return None
        original, project, created = values
        return CCREntry(
            original=original.decode("utf-8", "surrogatepass"),
            project=project.decode("utf-8") or None,
            created_at=float(created),
        )


_stores: dict[tuple[object, ...], CCRStore] = {}
_stores_lock = threading.Lock()


def get_ccr_store(settings: Settings) -> CCRStore:
    """The process-wide CCR store: Redis when ``MEM_REDIS_URL`` is set, in-process LRU+TTL otherwise.

    One instance per configuration, so the optimizer's puts and the API's gets see the same entries.
    """
    key: tuple[object, ...] = (settings.redis_url, settings.ccr_max_entries, settings.ccr_ttl_secs)
    with _stores_lock:
        store = _stores.get(key)
        if store is None:
            if settings.redis_url:
                store = RedisCCRStore.from_url(
                    settings.redis_url, max_entries=settings.ccr_max_entries, ttl_secs=settings.ccr_ttl_secs
                )
            else:
                store = MemoryCCRStore(settings.ccr_max_entries, settings.ccr_ttl_secs)
            _stores[key] = store
    return store
