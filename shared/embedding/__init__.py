"""Embedding providers: pick one from the settings with :func:`get_embedder`.

``MEM_EMBEDDER``: ``local`` (all-MiniLM-L6-v2 int8 via onnxruntime, the default), ``http`` (an
OpenAI-compatible, Ollama or text-embeddings-inference server), ``sentence-transformers`` (optional
package) or ``none`` (lexical search only).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from shared.config import Settings
from shared.embedding.base import Embedder, EmbedderUnavailable
from shared.embedding.cache import CachedEmbedder, QueryEmbeddingCache

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbedderUnavailable",
    "QueryEmbeddingCache",
    "get_embedder",
    "get_token_counter",
]

_lock = threading.Lock()
_instances: dict[tuple[object, ...], Embedder] = {}
_fallback_counter: Callable[[str], int] | None = None


def _settings_key(settings: Settings) -> tuple[object, ...]:
    # The pid is part of the key: a forked worker builds its own embedder (and onnxruntime session).
    return (
        os.getpid(),
        settings.embedder,
        settings.embedding_url,
        settings.embedding_api,
        settings.embedding_model,
        settings.embedding_dim,
        settings.embedding_api_key,
        settings.embedding_timeout_secs,
        settings.embed_batch_size,
        settings.embed_threads,
        settings.embed_cache_entries,
    )


def _build(settings: Settings) -> Embedder:
    inner: Embedder
    if settings.embedder == "local":
        from shared.embedding.local import LocalOnnxEmbedder

        inner = LocalOnnxEmbedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    elif settings.embedder == "http":
        from shared.embedding.http import HttpEmbedder

        if not settings.embedding_url:
            raise EmbedderUnavailable("MEM_EMBEDDER=http needs MEM_EMBEDDING_URL")
        inner = HttpEmbedder(
            settings.embedding_url,
            api=settings.embedding_api,
            model=settings.embedding_model,
            dim=settings.embedding_dim,
            api_key=settings.embedding_api_key,
            timeout_secs=settings.embedding_timeout_secs,
            batch_size=settings.embed_batch_size,
        )
    elif settings.embedder == "sentence-transformers":
        from shared.embedding.sentence_transformers import SentenceTransformerEmbedder

        inner = SentenceTransformerEmbedder(settings.embedding_model, batch_size=settings.embed_batch_size)
    else:
        raise EmbedderUnavailable(f"unknown MEM_EMBEDDER {settings.embedder!r}")
    return CachedEmbedder(inner, max_entries=max(1, settings.embed_cache_entries))


def get_embedder(settings: Settings) -> Embedder | None:
    """The process's embedder for ``settings`` (built once, cached), or None when ``MEM_EMBEDDER=none``.

    The returned embedder caches chunk vectors in process. The local model's session is built on the
    first ``embed()`` call, so this is cheap to call at import or start-up. Raises
    :class:`EmbedderUnavailable` when the configured backend cannot be set up.
    """
    if settings.embedder == "none":
        return None
    key = _settings_key(settings)
    with _lock:
        embedder = _instances.get(key)
        if embedder is None:
            embedder = _instances[key] = _build(settings)
        return embedder


def get_token_counter(settings: Settings) -> Callable[[str], int]:
    """The token counter the chunker should use: the embedder's, or MiniLM's when there is no embedder."""
    global _fallback_counter
    embedder = get_embedder(settings)
    if embedder is not None:
        return embedder.count_tokens
    with _lock:
        if _fallback_counter is None:
            from shared.embedding.local import TokenCounter  # onnxruntime is imported only when needed

            _fallback_counter = TokenCounter()
        return _fallback_counter
