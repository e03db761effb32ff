"""pgvector: the semantic half of retrieval.

Vectors of every model share ``chunks.embedding``; each (model, dimension) pair gets its own partial HNSW
expression index, and every query names its model, so vectors of two models are never compared.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from sqlalchemy import Engine, text

from shared.search.glob import glob_to_regex
from shared.search.lexical import LexicalFilters

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


# --- semantic search ----------------------------------------------------------------------------

# pgvector >= 0.8: keep scanning the HNSW graph until enough rows pass the WHERE clause, instead of
# returning fewer than LIMIT when a project or filter is selective. relaxed_order may return rows
# slightly out of distance order; callers sort by the returned distance.
ITERATIVE_SCAN = "relaxed_order"


def _model_literal(model_id: str) -> str:
    # Inlined rather than bound: a partial index is only usable when the planner can prove the query's
    # predicate implies the index's, which a generic plan of a prepared statement never can.
    if not re.fullmatch(r"[A-Za-z0-9_.:/@+ -]{1,200}", model_id):
        raise ValueError(f"model id {model_id!r} has unexpected characters")
    return "'" + model_id.replace("'", "''") + "'"


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of a vector (``[0.1,0.2,...]``); non-finite values are rejected."""
    values = [float(v) for v in vector]
    if not values or not all(math.isfinite(v) for v in values):
        raise ValueError("query vector is empty or holds NaN/inf")
    return "[" + ",".join(repr(v) for v in values) + "]"


def glob_to_postgres_regex(glob: str) -> str:
    """An anchored PostgreSQL regular expression matching what ``fnmatch.fnmatchcase(path, glob)`` matches."""
    # In PostgreSQL's advanced regular expressions a backslash before any non-alphanumeric character
    # makes it literal, inside and outside brackets.
    return "^" + glob_to_regex(glob, lambda ch: ch if ch.isalnum() else "\\" + ch) + "$"


def semantic_search(
    engine: Engine,
    vector: Sequence[float],
    *,
    model_id: str,
    project_ids: Sequence[int],
    filters: LexicalFilters | None = None,
    limit: int = 50,
    ef_search: int = 100,
    timeout_ms: int | None = None,
    exact: bool = False,
) -> list[tuple[str, float]]:
    """``(chunk id, cosine distance)`` of the nearest chunks of ``project_ids`` under ``filters``, nearest first.

    Uses the model's partial HNSW expression index (``embedding::vector(dim) <=> q`` with the model id
    inlined) with ``hnsw.ef_search`` and iterative scans; ``exact=True`` disables index scans, for
    measuring recall against the true neighbours.
    """
    dim = len(vector)
    if not 1 <= dim <= 16000:
        raise ValueError(f"embedding dimension {dim} is out of range")
    if not project_ids or limit <= 0:
        return []
    filters = filters or LexicalFilters()
    expr = f"(embedding::vector({dim}))"
    where = [f"model_id = {_model_literal(model_id)}", "project_id = ANY(:pids)"]
    params: dict[str, object] = {
        "q": vector_literal(vector),
        "pids": [int(p) for p in project_ids],
        "k": int(limit),
    }
    if filters.levels:
        where.append("level = ANY(:levels)")
        params["levels"] = [int(level) for level in filters.levels]
    if filters.source_pattern:
        where.append("source ~ :source_re")
        params["source_re"] = glob_to_postgres_regex(filters.source_pattern)
    if filters.updated_since is not None:
        where.append("updated_at >= :since")
        params["since"] = filters.updated_since
    if filters.tags:
        where.append("tags @> CAST(:tags AS text[])")
        params["tags"] = list(filters.tags)
    sql = (
        f"SELECT id, {expr} <=> CAST(:q AS vector({dim})) AS distance FROM chunks "
        f"WHERE {' AND '.join(where)} "
        f"ORDER BY {expr} <=> CAST(:q AS vector({dim})) LIMIT :k"
    )
    # Transaction-local settings (SET LOCAL), all in one round trip.
    local = {"statement_timeout": str(int(timeout_ms))} if timeout_ms else {}
    if exact:
        local |= {"enable_indexscan": "off", "enable_bitmapscan": "off"}
    else:
        local |= {"hnsw.ef_search": str(max(1, min(int(ef_search), 1000))), "hnsw.iterative_scan": ITERATIVE_SCAN}
    settings_sql = "SELECT " + ", ".join(f"set_config(:n{i}, :v{i}, true)" for i in range(len(local)))
    settings_params = {f"n{i}": name for i, name in enumerate(local)} | {
        f"v{i}": value for i, value in enumerate(local.values())
    }
    with engine.connect() as conn, conn.begin():
        conn.execute(text(settings_sql), settings_params)
        rows = conn.execute(text(sql), params).all()
    return sorted(((str(r[0]), float(r[1])) for r in rows), key=lambda pair: (pair[1], pair[0]))
