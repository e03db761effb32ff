"""pgvector: the semantic half of retrieval.

Vectors of every model share ``chunks.embedding``; each (model, dimension) pair gets its own partial HNSW
expression index, and every query names its model, so vectors of two models are never compared.
"""

from __future__ import annotations

import hashlib
import re

from sqlalchemy import Engine, text

_INDEX_LOCK_ID = 0x6D656D32  # "mem2"


def vector_index_name(model_id: str, dim: int) -> str:
    """A stable, SQL-safe index name for one model's vectors."""
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:10]
    return f"ix_chunks_hnsw_{digest}_{dim}"


def ensure_vector_index(engine: Engine, model_id: str, dim: int) -> str:
    """Create the HNSW (cosine) index for ``model_id`` if it does not exist; returns its name."""
    if not 1 <= dim <= 16000:
        raise ValueError(f"embedding dimension {dim} is out of range")
    name = vector_index_name(model_id, dim)
    literal = "'" + model_id.replace("'", "''") + "'"
    if not re.fullmatch(r"[A-Za-z0-9_.:/@+ -]{1,200}", model_id):
        raise ValueError(f"model id {model_id!r} has unexpected characters")
    with engine.connect() as conn:
        conn.execute(text("select pg_advisory_lock(:id)"), {"id": _INDEX_LOCK_ID})
        try:
            conn.execute(
                text(
                    f"CREATE INDEX IF NOT EXISTS {name} ON chunks "
                    f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                    f"WHERE model_id = {literal}"
                )
            )
            conn.commit()
        finally:
            conn.execute(text("select pg_advisory_unlock(:id)"), {"id": _INDEX_LOCK_ID})
            conn.commit()
    return name
