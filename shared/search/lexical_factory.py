"""Pick and build the lexical engine from the settings, once per process."""

from __future__ import annotations

import os
import threading

from shared.config import Settings
from shared.search.lexical import LexicalIndex

_lock = threading.Lock()
_instances: dict[tuple[object, ...], LexicalIndex] = {}


def _key(settings: Settings) -> tuple[object, ...]:
    # The pid is part of the key: a Celery prefork child must not use its parent's tantivy handles
    # (Rust threads do not survive fork).
    if settings.lexical_engine == "opensearch":
        return (os.getpid(), "opensearch", settings.opensearch_url, settings.opensearch_user)
    return (os.getpid(), "tantivy", str(settings.resolved_data_dir))


def _build(settings: Settings) -> LexicalIndex:
    if settings.lexical_engine == "opensearch":
        from shared.search.opensearch_index import OpenSearchLexicalIndex

        if not settings.opensearch_url:
            raise ValueError("MEM_LEXICAL_BACKEND=opensearch needs MEM_OPENSEARCH_URL")
        return OpenSearchLexicalIndex(
            settings.opensearch_url,
            user=settings.opensearch_user,
            password=settings.opensearch_password,
            verify_certs=settings.opensearch_verify_certs,
            timeout_secs=settings.opensearch_timeout_secs,
        )
    from shared.search.tantivy_index import TantivyLexicalIndex

    return TantivyLexicalIndex(settings.resolved_data_dir / "tantivy")


def get_lexical_index(settings: Settings) -> LexicalIndex:
    """The process's lexical engine for ``settings`` (OpenSearch when configured, else Tantivy).

    Raises :class:`~shared.search.lexical.LexicalUnavailable` when the engine cannot be opened
    and ``ValueError`` when the settings are inconsistent.
    """
    key = _key(settings)
    with _lock:
        # Entries inherited from a parent process are unusable here; drop them (without closing).
        for stale in [k for k in _instances if k[0] != key[0]]:
            del _instances[stale]
        index = _instances.get(key)
        if index is None:
            index = _build(settings)
            _instances[key] = index
        return index


def reset_lexical_indexes() -> None:
    """Forget every built engine (tests that switch data directories call this)."""
    with _lock:
        _instances.clear()
