"""CCR stores: round trip, project recorded, LRU and TTL eviction; in process and on the real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from shared.config import Settings
from shared.optimizer.ccr import (
    CCRUnavailable,
    MemoryCCRStore,
    RedisCCRStore,
    ccr_hash,
    ccr_marker,
    get_ccr_store,
    is_ccr_hash,
)

REDIS_URL = "redis://127.0.0.1:6379/0"


class FakeClock:
    """A clock the test moves by hand (TTL without sleeping)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_memory_round_trip_is_byte_identical_and_records_the_project() -> None:
    store = MemoryCCRStore(10, 60)
    original = "line one\n\ttabbed — ünïcode ✓\r\nlast line without newline"
    hash_ = store.put(original, project="payments")
    assert is_ccr_hash(hash_)
    entry = store.get(hash_)
    assert entry is not None
    assert entry.original == original
    assert entry.original.encode() == original.encode()
    assert entry.project == "payments"
    assert entry.created_at > 0


def test_hash_is_96_bits_of_the_sha256_in_29_digits() -> None:
    import hashlib

    digest = hashlib.sha256(b"payments\x00some text").digest()
    assert ccr_hash("some text", "payments") == str(int.from_bytes(digest[:12], "big")).zfill(29)
    leading_zero = next(f"t{i}" for i in range(10_000) if hashlib.sha256(b"\x00" + f"t{i}".encode()).digest()[0] < 8)
    assert len(ccr_hash(leading_zero)) == 29 and ccr_hash(leading_zero).startswith("0")
    assert is_ccr_hash("0" * 29) and not is_ccr_hash("0" * 28) and not is_ccr_hash("f" * 24)
    assert not is_ccr_hash("٣" * 29)  # digits of other scripts are not ASCII digits


def test_marker_costs_the_same_few_bpe_tokens_for_every_hash() -> None:
    # Three digits a token in both BPE encodings: the cost no_gain weighs is fixed, not luck of the hash.
    from shared.optimizer.tokens import count_tokens

    markers = [ccr_marker(ccr_hash(f"original {i}", "p")) for i in range(300)]
    assert {count_tokens(marker, "cl100k_base") for marker in markers} == {15}
    assert {count_tokens(marker, "o200k_base") for marker in markers} == {14}


def test_same_text_in_two_projects_gives_two_entries() -> None:
    store = MemoryCCRStore(10, 60)
    a = store.put("shared text", project="a")
    b = store.put("shared text", project="b")
    assert a != b
    assert store.get(a).project == "a"  # type: ignore[union-attr]
    assert store.get(b).project == "b"  # type: ignore[union-attr]
    assert ccr_hash("shared text", "a") == a


def test_memory_lru_evicts_least_recently_used() -> None:
    store = MemoryCCRStore(2, 60)
    first = store.put("first")
    second = store.put("second")
    assert store.get(first) is not None  # first is now the most recently used
    store.put("third")
    assert store.get(second) is None
    assert store.get(first) is not None
    assert len(store) == 2


def test_memory_ttl_expires_entries() -> None:
    clock = FakeClock()
    store = MemoryCCRStore(10, 30, timer=clock)
    hash_ = store.put("short-lived")
    clock.now += 29
    assert store.get(hash_) is not None
    clock.now += 2
    assert store.get(hash_) is None


def test_unknown_hash_is_none() -> None:
    assert MemoryCCRStore(1, 1).get("0" * 29) is None


def test_bad_capacity_is_refused() -> None:
    with pytest.raises(ValueError):
        MemoryCCRStore(0, 10)


def test_get_ccr_store_is_process_wide_and_in_process_without_redis() -> None:
    settings = Settings(redis_url=None, ccr_max_entries=7, ccr_ttl_secs=11)
    store = get_ccr_store(settings)
    assert isinstance(store, MemoryCCRStore)
    assert get_ccr_store(Settings(redis_url=None, ccr_max_entries=7, ccr_ttl_secs=11)) is store


# --- Redis ---------------------------------------------------------------------------------------


@pytest.fixture
def redis_client() -> Iterator[object]:
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis not reachable at {REDIS_URL}: {exc}")
    prefix = f"test:ccr:{uuid.uuid4().hex}:"
    client.test_prefix = prefix  # type: ignore[attr-defined]
    yield client
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


def test_redis_round_trip_and_project(redis_client: object) -> None:
    store = RedisCCRStore(redis_client, max_entries=10, ttl_secs=60, prefix=redis_client.test_prefix)  # type: ignore[attr-defined]
    original = "ERROR boom ✓\n" * 100 + "tail without newline"
    hash_ = store.put(original, project="infra")
    entry = store.get(hash_)
    assert entry is not None
    assert entry.original == original
    assert entry.project == "infra"
    assert store.get("9" * 29) is None
    assert store.get("not-a-hash") is None


def test_redis_entries_carry_the_ttl(redis_client: object) -> None:
    prefix = redis_client.test_prefix  # type: ignore[attr-defined]
    store = RedisCCRStore(redis_client, max_entries=10, ttl_secs=45, prefix=prefix)
    hash_ = store.put("expiring", project=None)
    ttl = redis_client.ttl(f"{prefix}e:{hash_}")  # type: ignore[attr-defined]
    assert 0 < ttl <= 45
    entry = store.get(hash_)
    assert entry is not None and entry.project is None


def test_redis_ttl_expiry(redis_client: object) -> None:
    """Expiry is Redis's own: the test shortens the key's life to 1 ms and waits on the condition."""
    import time

    prefix = redis_client.test_prefix  # type: ignore[attr-defined]
    store = RedisCCRStore(redis_client, max_entries=10, ttl_secs=60, prefix=prefix)
    hash_ = store.put("soon gone")
    redis_client.pexpire(f"{prefix}e:{hash_}", 1)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 5
    while store.get(hash_) is not None:
        assert time.monotonic() < deadline, "entry did not expire"
        time.sleep(0.01)


def test_redis_lru_capacity(redis_client: object) -> None:
    clock = FakeClock()
    prefix = redis_client.test_prefix  # type: ignore[attr-defined]
    store = RedisCCRStore(redis_client, max_entries=2, ttl_secs=600, prefix=prefix, clock=clock)
    first = store.put("first")
    clock.now += 1
    second = store.put("second")
    clock.now += 1
    assert store.get(first) is not None  # touch: first becomes most recent
    clock.now += 1
    third = store.put("third")
    assert store.get(second) is None
    assert store.get(first) is not None
    assert store.get(third) is not None
    assert redis_client.zcard(f"{prefix}lru") == 2  # type: ignore[attr-defined]


def test_redis_unreachable_raises_ccr_unavailable() -> None:
    pytest.importorskip("redis")
    store = RedisCCRStore.from_url("redis://127.0.0.1:1/0", max_entries=2, ttl_secs=60)
    with pytest.raises(CCRUnavailable):
        store.put("x")
    with pytest.raises(CCRUnavailable):
        store.get("1" * 29)


def test_get_ccr_store_uses_redis_when_configured(redis_client: object) -> None:
    # Only the choice is checked here: putting through the default prefix would touch a developer's
    # running service's entries on the same Redis.
    store = get_ccr_store(Settings(redis_url=REDIS_URL, ccr_max_entries=5, ccr_ttl_secs=30))
    assert isinstance(store, RedisCCRStore)


def test_two_redis_stores_share_entries_like_two_replicas(redis_client: object) -> None:
    prefix = redis_client.test_prefix  # type: ignore[attr-defined]
    writer = RedisCCRStore.from_url(REDIS_URL, max_entries=5, ttl_secs=30, prefix=prefix)
    reader = RedisCCRStore.from_url(REDIS_URL, max_entries=5, ttl_secs=30, prefix=prefix)
    hash_ = writer.put("seen by every replica", project="p")
    entry = reader.get(hash_)
    assert entry is not None and entry.original == "seen by every replica" and entry.project == "p"
