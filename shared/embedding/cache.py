"""Caches in front of an embedder.

* :class:`CachedEmbedder`: an in-process LRU keyed by ``(model_id, sha256(text))``, so re-indexing an
  unchanged chunk, or the same text in two documents, is embedded once.
* :class:`QueryEmbeddingCache`: search queries repeat (agents retry, dashboards poll). An LRU with a
  TTL keyed by ``(model_id, normalised query)``; in Redis when a URL is given, so every API process
  shares it, and in process otherwise. A Redis outage degrades to the in-process cache, never to an
  error.

Both use ``cachetools`` (LRU and TTL eviction) behind a lock, since its caches are not thread-safe.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence

import cachetools
import numpy as np
import redis

from shared.embedding.base import Embedder

log = logging.getLogger(__name__)


def text_key(model_id: str, text: str) -> tuple[str, str]:
    """The cache key of one text under one model."""
    return model_id, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def normalise_query(query: str) -> str:
    """Queries that differ only in Unicode form or whitespace embed alike (case is kept: models may be cased)."""
    return " ".join(unicodedata.normalize("NFKC", query).split())


class CachedEmbedder:
    """An :class:`Embedder` that remembers the last ``max_entries`` vectors it produced."""

    def __init__(self, inner: Embedder, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._cache: cachetools.LRUCache[tuple[str, str], np.ndarray] = cachetools.LRUCache(max_entries)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count_tokens(self, text: str) -> int:
        """The inner embedder's token count."""
        return self.inner.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``, asking the inner embedder only for texts not cached (each distinct text once)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        texts = list(texts)
        keys = [text_key(self.model_id, text) for text in texts]
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: dict[tuple[str, str], list[int]] = {}
        with self._lock:
            for position, key in enumerate(keys):
                vector = self._cache.get(key)
                if vector is None:
                    missing.setdefault(key, []).append(position)
                else:
                    result[position] = vector
            self.hits += len(texts) - sum(len(p) for p in missing.values())
            self.misses += len(missing)
        if missing:
            # The inner call runs outside the lock: a slow model must not serialise cache hits.
            fresh = self.inner.embed([texts[positions[0]] for positions in missing.values()])
            with self._lock:
                for (key, positions), vector in zip(missing.items(), fresh, strict=True):
                    stored = np.array(vector, dtype=np.float32)
                    stored.setflags(write=False)
                    self._cache[key] = stored
                    result[positions] = stored
        return result


class QueryEmbeddingCache:
    """Query vectors with a time to live: in Redis when ``redis_url`` is set, in process otherwise."""

    def __init__(
        self,
        *,
        ttl_secs: float = 3600.0,
        max_entries: int = 1024,
        redis_url: str | None = None,
        key_prefix: str = "mem:qemb:",
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_secs <= 0 or max_entries < 1:
            raise ValueError("ttl_secs and max_entries must be positive")
        self.ttl_secs = ttl_secs
        self.key_prefix = key_prefix
        self._local: cachetools.TTLCache[str, np.ndarray] = cachetools.TTLCache(
            max_entries, ttl_secs, timer=timer
        )
        self._lock = threading.Lock()
        self._redis: redis.Redis | None = None
        if redis_url:
            self._redis = redis.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)

    def _key(self, model_id: str, query: str) -> str:
        digest = hashlib.sha256(f"{model_id}\0{normalise_query(query)}".encode("utf-8", "surrogatepass"))
        return self.key_prefix + digest.hexdigest()

    def get(self, model_id: str, query: str) -> np.ndarray | None:
        """The cached vector of ``query`` under ``model_id``, or None."""
        key = self._key(model_id, query)
        if self._redis is not None:
            try:
                raw = self._redis.get(key)
            except redis.RedisError as exc:
                log.warning(
                    "query cache: redis unavailable, using the in-process cache", extra={"error": str(exc)}
                )
            else:
                if raw is None:
                    return None
                vector = np.frombuffer(raw, dtype=np.float32)
                return vector if vector.size else None
        with self._lock:
            return self._local.get(key)

    def put(self, model_id: str, query: str, vector: np.ndarray) -> None:
        """Remember ``vector`` for ``query`` under ``model_id`` for ``ttl_secs``."""
        key = self._key(model_id, query)
        stored = np.array(vector, dtype=np.float32).reshape(-1)
        stored.setflags(write=False)
        if self._redis is not None:
            try:
                self._redis.set(key, stored.tobytes(), px=max(1, int(self.ttl_secs * 1000)))
                return
            except redis.RedisError as exc:
                log.warning(
                    "query cache: redis unavailable, using the in-process cache", extra={"error": str(exc)}
                )
        with self._lock:
            self._local[key] = stored

    def embed_query(self, embedder: Embedder, query: str) -> np.ndarray:
        """The vector of ``query``: from the cache, or embedded now and cached."""
        cached = self.get(embedder.model_id, query)
        if cached is not None and cached.shape == (embedder.dim,):
            return cached
        vector = embedder.embed([normalise_query(query)])[0]
        self.put(embedder.model_id, query, vector)
        return vector
