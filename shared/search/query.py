"""Hybrid retrieval: normalise -> route -> retrieve (parallel, bounded, timed) -> normalise -> fuse -> explain.

:func:`run_query` is the one entry point (the API, ``mem query``, ``mem eval`` and diagnosis call it).
The caller passes the projects the principal may see; both engines filter by them, and the rows read
back from the database are filtered by them again, so no caller can widen its own scope.

Degradation: an engine that fails or exceeds ``query_engine_timeout_secs`` is reported in
``warnings`` and the answer comes from the other one; an embedder that is missing, failing or slower
than ``query_embed_timeout_secs`` routes the query lexically with a warning. Only when no engine can
answer at all is :class:`SearchUnavailable` raised (the API answers 503, never 500).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import numpy as np
from sqlalchemy import text

from shared.config import Settings, get_settings
from shared.db.engine import get_engine, session_scope
from shared.search.context import MAX_CONTEXT_CHUNKS, breadcrumb_full, fetch_neighbours, vault_url
from shared.search.facets import FacetRow, compute_facets
from shared.search.fusion import EngineHit, FusedHit, Fusion, fuse, lexical_hits, semantic_hits
from shared.search.lexical import LexicalFilters, LexicalQuery
from shared.search.normalise import MAX_QUERY_CHARS, NormalisedQuery, normalise_query
from shared.search.routing import EmbedderState, Method, Route, RouteContext, route_query

log = logging.getLogger(__name__)

RequestedMethod = Literal["auto", "hybrid", "semantic", "lexical"]
METHODS: tuple[str, ...] = ("auto", "hybrid", "semantic", "lexical")
FUSIONS: tuple[str, ...] = ("linear", "rrf")
DEFAULT_WEIGHTS = (0.6, 0.4)
RRF_WEIGHTS = (0.5, 0.5)
MAX_CANDIDATES = 1000
MAX_TAGS = 20
WEIGHT_TOLERANCE = 1e-6
SEMANTIC_ENGINE = "pgvector"
# Typo tolerance: identifiers and error codes of the query are also matched one edit away (decided by
# `mem eval` on mistyped alert names; see docs/evaluation.md).
FUZZY_IDENTIFIERS = True


class QueryError(ValueError):
    """The request cannot be run as asked; the message says what to change (an HTTP 400)."""


class SearchUnavailable(RuntimeError):
    """No engine could answer (an HTTP 503); ``warnings`` say why."""

    def __init__(self, message: str, warnings: list[str]) -> None:
        super().__init__(message)
        self.warnings = warnings


@dataclass(frozen=True)
class QueryRequest:
    """A search as the API, the CLI and the evaluation ask for it."""

    query: str
    projects: Sequence[str]  # already restricted to what the caller may see
    limit: int = 10
    method: RequestedMethod = "auto"
    weights: tuple[float, float] | None = None  # (semantic, lexical); None = the fusion's default
    fusion: Fusion = "linear"
    candidates: int = 50
    filters: LexicalFilters = field(default_factory=LexicalFilters)
    explain: bool = True
    context_chunks: int = 0  # with-context: neighbours on each side
    bearer_token: str | None = None
    dedupe: bool = True  # collapse near-identical chunks (see :func:`near_duplicate_key`)


@dataclass
class Candidate:
    """A fused chunk with its row."""

    hit: FusedHit
    row: dict[str, Any]


@dataclass
class Retrieval:
    """What the engines returned for one query, before fusion (kept apart so ``mem eval --sweep``
    can fuse the same candidates with many weights)."""

    query: NormalisedQuery
    route: Route
    method: Method  # what actually ran (the route, minus engines that failed)
    filters: LexicalFilters
    semantic: list[EngineHit]
    lexical: list[EngineHit]
    warnings: list[str]
    metrics: dict[str, Any]
    project_ids: dict[str, int]


@dataclass
class QueryResult:
    """The answer: results with explanations, facets, route, metrics and warnings."""

    request: QueryRequest
    retrieval: Retrieval
    results: list[Candidate]
    facets: dict[str, dict[str, int]]
    metrics: dict[str, Any]
    settings: Settings

    @property
    def warnings(self) -> list[str]:
        """Degradations the caller should know about."""
        return self.retrieval.warnings

    def to_dict(self, project: str | None = None) -> dict[str, Any]:
        """The JSON response of ``/memory/query`` (and ``/with-context`` when context was asked for)."""
        req = self.request
        out_results = []
        for cand in self.results:
            row = cand.row
            item: dict[str, Any] = {
                "id": row["id"],
                "project": row["project"],
                "text": row["text"],
                "source": row["source"],
                "section": row["section_title"],
                "anchor": row["anchor"],
                "level": row["level"],
                "breadcrumb": row["breadcrumb"],
                "tags": list(row["tags"] or []),
                "updated_at": row["updated_at"].isoformat() if row["updated_at"] else None,
                "lines": [row["start_line"], row["end_line"]],
                "score": round(cand.hit.score, 6),
            }
            if req.explain:
                item["breakdown"] = cand.hit.breakdown()
            if "context" in row:
                item["context"] = row["context"]
            out_results.append(item)
        return {
            "query": req.query,
            "project": project if project is not None else ",".join(req.projects),
            "search_method": self.retrieval.method,
            "route": self.retrieval.route.to_dict(),
            "entities": self.retrieval.query.entities.to_dict(),
            "filters": filters_to_dict(self.retrieval.filters),
            "results": out_results,
            "facets": self.facets,
            "metrics": self.metrics,
            "warnings": list(self.warnings),
        }


def filters_to_dict(filters: LexicalFilters) -> dict[str, Any]:
    """The filters that were applied, as JSON."""
    return {
        "level": list(filters.levels),
        "source_pattern": filters.source_pattern,
        "updated_since": filters.updated_since.isoformat() if filters.updated_since else None,
        "tags": list(filters.tags),
    }


# --- validation -------------------------------------------------------------------------------


def resolve_weights(req: QueryRequest) -> tuple[float, float]:
    """The (semantic, lexical) weights to use; raises :class:`QueryError` when they are invalid."""
    if req.weights is None:
        return RRF_WEIGHTS if req.fusion == "rrf" else DEFAULT_WEIGHTS
    w_sem, w_lex = (float(w) for w in req.weights)
    if not (0.0 <= w_sem <= 1.0 and 0.0 <= w_lex <= 1.0):
        raise QueryError("weights must each be between 0 and 1")
    if abs(w_sem + w_lex - 1.0) > WEIGHT_TOLERANCE:
        raise QueryError(f"weights must sum to 1 (semantic {w_sem} + lexical {w_lex} = {w_sem + w_lex:g})")
    return w_sem, w_lex


def validate_request(req: QueryRequest) -> None:
    """Raise :class:`QueryError` naming the first thing wrong with ``req``."""
    if not isinstance(req.query, str) or not req.query.strip():
        raise QueryError("query must not be empty")
    if len(req.query) > MAX_QUERY_CHARS:
        raise QueryError(f"query is {len(req.query)} characters; at most {MAX_QUERY_CHARS} are accepted")
    if req.method not in METHODS:
        raise QueryError(f"method must be one of {', '.join(METHODS)}")
    if req.fusion not in FUSIONS:
        raise QueryError(f"fusion must be one of {', '.join(FUSIONS)}")
    if not 1 <= int(req.limit) <= MAX_CANDIDATES:
        raise QueryError(f"limit must be between 1 and {MAX_CANDIDATES}")
    if not 1 <= int(req.candidates) <= MAX_CANDIDATES:
        raise QueryError(f"candidates must be between 1 and {MAX_CANDIDATES}")
    if not 0 <= int(req.context_chunks) <= MAX_CONTEXT_CHUNKS:
        raise QueryError(f"context_chunks must be between 0 and {MAX_CONTEXT_CHUNKS}")
    if len(req.filters.tags) > MAX_TAGS:
        raise QueryError(f"at most {MAX_TAGS} tags may be given")
    if req.filters.source_pattern is not None and not req.filters.source_pattern.strip():
        raise QueryError("filters.source_pattern must not be empty")
    resolve_weights(req)


# --- shared resources ---------------------------------------------------------------------------

_pool_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None
_cache_lock = threading.Lock()
_caches: dict[tuple[object, ...], Any] = {}


def query_pool(settings: Settings) -> ThreadPoolExecutor:
    """The bounded pool that runs embedding and engines (one per process, rebuilt after a fork)."""
    global _pool
    size = max(2, int(settings.query_threads))
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid() or _pool[1] != size:
            _pool = (os.getpid(), size, ThreadPoolExecutor(max_workers=size, thread_name_prefix="query"))
        return _pool[2]


def query_cache(settings: Settings) -> Any:
    """The query-embedding cache (Redis-backed when ``MEM_REDIS_URL`` is set), one per settings."""
    from shared.embedding import QueryEmbeddingCache

    key = (os.getpid(), settings.query_cache_ttl_secs, settings.redis_url)
    with _cache_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = QueryEmbeddingCache(
                ttl_secs=settings.query_cache_ttl_secs, redis_url=settings.redis_url
            )
        return cache


def reset_query_state() -> None:
    """Forget the pool and caches (tests that change settings call this)."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool[0] == os.getpid():
            _pool[2].shutdown(wait=False, cancel_futures=True)
        _pool = None
    with _cache_lock:
        _caches.clear()


def forget_query_vectors(settings: Settings) -> None:
    """Empty the query-embedding caches of this process (benchmarks: every query pays its embedding).

    Besides :class:`QueryEmbeddingCache`, the embedder's own LRU of texts remembers query texts too.
    """
    from shared.embedding import get_embedder

    reset_query_state()
    embedder = get_embedder(settings)
    remembered = getattr(embedder, "_cache", None)  # CachedEmbedder has no public clear()
    if remembered is not None:
        remembered.clear()


def _read_connection() -> Any:
    """A pooled connection in autocommit mode, for single-statement reads."""
    return get_engine().connect().execution_options(isolation_level="AUTOCOMMIT")


def resolve_project_ids(names: Sequence[str]) -> dict[str, int]:
    """``{name: id}`` for the given projects that exist."""
    if not names:
        return {}
    with _read_connection() as conn:
        rows = conn.execute(text("SELECT name, id FROM projects WHERE name = ANY(:names)"), {"names": list(names)})
        return {name: int(pid) for name, pid in rows}


# --- retrieval ----------------------------------------------------------------------------------


@dataclass
class _Embedding:
    state: EmbedderState = "unavailable"
    vector: np.ndarray | None = None
    model_id: str = ""
    ms: float = 0.0
    detail: str = ""


def _embed_query(settings: Settings, text: str) -> _Embedding:
    """Embed ``text`` through the cache, within the embed timeout."""
    from shared.embedding import EmbedderUnavailable, get_embedder

    started = time.perf_counter()
    try:
        embedder = get_embedder(settings)
    except EmbedderUnavailable as exc:
        return _Embedding("unavailable", detail=str(exc))
    if embedder is None:
        return _Embedding("unavailable", detail="no embedder is configured (MEM_EMBEDDER=none)")
    cache = query_cache(settings)
    future = query_pool(settings).submit(cache.embed_query, embedder, text)
    try:
        vector = future.result(timeout=settings.query_embed_timeout_secs)
    except FutureTimeout:
        return _Embedding("timeout", detail=f"no answer within {settings.query_embed_timeout_secs:g}s",
                          ms=(time.perf_counter() - started) * 1000)
    except Exception as exc:  # any backend error means "no vector"; the query still gets an answer
        log.warning("query embedding failed", extra={"error": str(exc)})
        return _Embedding("unavailable", detail=f"{type(exc).__name__}: {exc}"[:300],
                          ms=(time.perf_counter() - started) * 1000)
    return _Embedding("ok", np.asarray(vector, dtype=np.float32), embedder.model_id,
                      (time.perf_counter() - started) * 1000)


def _lexical(settings: Settings, q: LexicalQuery) -> tuple[list[EngineHit], float, str]:
    from shared.search.lexical_factory import get_lexical_index

    started = time.perf_counter()
    index = get_lexical_index(settings)
    hits = index.search(q)
    pairs = [(h.chunk_id, h.score) for h in hits if not q.projects or h.project in q.projects or not h.project]
    return lexical_hits(pairs), (time.perf_counter() - started) * 1000, index.name


def _semantic(
    settings: Settings, emb: _Embedding, project_ids: Sequence[int], filters: LexicalFilters, limit: int
) -> tuple[list[EngineHit], float]:
    from shared.search.vector_store import semantic_search

    started = time.perf_counter()
    assert emb.vector is not None
    pairs = semantic_search(
        get_engine(settings),
        emb.vector.tolist(),
        model_id=emb.model_id,
        project_ids=project_ids,
        filters=filters,
        limit=limit,
        ef_search=max(settings.hnsw_ef_search, limit),
        timeout_ms=int(settings.query_engine_timeout_secs * 1000),
    )
    return semantic_hits(pairs), (time.perf_counter() - started) * 1000


_PATH = re.compile(r"(?<![\w.])/[^\s:'\"]+")


def _engine_error(exc: BaseException) -> str:
    """A one-line reason for ``warnings``: no stack, no server file paths."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return _PATH.sub("<path>", text)[:300]


def _collect(future: Future[Any], engine: str, deadline: float, timeout: float, warnings: list[str]) -> Any:
    """The engine's answer, or None with a warning saying why there is none (timeout or failure)."""
    other = "lexical" if engine == "semantic" else "semantic"
    try:
        return future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout:
        future.cancel()
        warnings.append(f"the {engine} engine did not answer within {timeout:g}s; results are {other} only")
    except Exception as exc:  # any engine error degrades the answer; it never fails the request
        log.warning(f"{engine} engine failed", extra={"error": str(exc)})
        warnings.append(f"the {engine} engine failed ({_engine_error(exc)}); results are {other} only")
    return None


def retrieve(req: QueryRequest, settings: Settings | None = None) -> Retrieval:
    """Normalise, route and run the engines for ``req`` (validated here); no fusion yet."""
    settings = settings or get_settings()
    validate_request(req)
    total_started = time.perf_counter()
    query = normalise_query(req.query)
    project_ids = resolve_project_ids(req.projects)
    pool = query_pool(settings)
    timeout = settings.query_engine_timeout_secs
    warnings: list[str] = []
    filters = req.filters

    lexical_future: Future[tuple[list[EngineHit], float, str]] | None = None

    def start_lexical(with_filters: LexicalFilters) -> Future[tuple[list[EngineHit], float, str]]:
        nonlocal lexical_future
        if lexical_future is None:
            lq = LexicalQuery(
                text=query.lexical_text,
                projects=list(project_ids),
                limit=req.candidates,
                filters=with_filters,
                bearer_token=req.bearer_token,
                fuzzy=query.fuzzy_words if FUZZY_IDENTIFIERS else (),
            )
            lexical_future = pool.submit(_lexical, settings, lq)
        return lexical_future

    embedding = _Embedding()

    def probe() -> EmbedderState:
        nonlocal embedding
        # Both remaining auto outcomes (hybrid, or lexical because the embedder is down) use the
        # lexical engine with the request's filters: start it now, in parallel with the embedding.
        if req.method in ("auto", "hybrid") and project_ids:
            start_lexical(filters)
        embedding = _embed_query(settings, query.semantic_text)
        return embedding.state

    ctx = RouteContext(query=query, embedder_probe=probe)
    if req.method == "auto":
        route = route_query(ctx)
        if route.rule == "tag-or-mention" and query.entities.tags:
            merged = tuple(dict.fromkeys([*filters.tags, *query.entities.tags]))
            filters = replace(filters, tags=merged)
    else:
        route = Route(req.method, "requested by the caller", "explicit")  # type: ignore[arg-type]
    method: Method = route.method
    if route.rule == "embedder-down":
        warnings.append(f"the embedder is {ctx.embedder_state} ({embedding.detail}); answering lexically")
    if method in ("hybrid", "semantic") and ctx.embedder_state != "ok":
        warnings.append(
            f"the embedder is {ctx.embedder_state} ({embedding.detail}); answering from the lexical engine"
        )
        method = "lexical"

    metrics: dict[str, Any] = {
        "embed_ms": round(embedding.ms, 2),
        "semantic_ms": None,
        "lexical_ms": None,
        "semantic_engine": SEMANTIC_ENGINE if method in ("hybrid", "semantic") else None,
        "lexical_engine": None,
    }
    sem: list[EngineHit] = []
    lex: list[EngineHit] = []
    if project_ids:
        sem_future = None
        if method in ("hybrid", "semantic"):
            sem_future = pool.submit(_semantic, settings, embedding, list(project_ids.values()), filters,
                                     req.candidates)
        if method in ("hybrid", "lexical"):
            start_lexical(filters)
        deadline = time.monotonic() + timeout
        sem_ok = lex_ok = False
        if sem_future is not None:
            got = _collect(sem_future, "semantic", deadline, timeout, warnings)
            if got is not None:
                sem, semantic_ms = got
                metrics["semantic_ms"], sem_ok = round(semantic_ms, 2), True
        if method in ("hybrid", "lexical") and lexical_future is not None:
            got = _collect(lexical_future, "lexical", deadline, timeout, warnings)
            if got is not None:
                lex, lexical_ms, metrics["lexical_engine"] = got
                metrics["lexical_ms"], lex_ok = round(lexical_ms, 2), True
        if method == "hybrid":
            if not sem_ok and lex_ok:
                method = "lexical"
            elif sem_ok and not lex_ok:
                method = "semantic"
        if not sem_ok and not lex_ok:
            raise SearchUnavailable("no search engine could answer: " + "; ".join(warnings), warnings)
    metrics["candidates"] = {"semantic": len(sem), "lexical": len(lex)}
    metrics["retrieve_ms"] = round((time.perf_counter() - total_started) * 1000, 2)
    return Retrieval(query, route, method, filters, sem, lex, warnings, metrics, project_ids)


# --- fusion and assembly ------------------------------------------------------------------------

_ROWS_SQL = text(
    "SELECT c.id, c.document_id, c.ordinal, c.source, c.level, c.breadcrumb, c.section_title, c.anchor, "
    "c.text, c.tags, c.updated_at, c.start_line, c.end_line, p.name AS project "
    "FROM chunks c JOIN projects p ON p.id = c.project_id "
    "WHERE c.id = ANY(:ids) AND c.project_id = ANY(:pids)"
)


def fetch_rows(chunk_ids: Sequence[str], project_ids: Sequence[int]) -> dict[str, dict[str, Any]]:
    """The chunk rows of ``chunk_ids`` that belong to ``project_ids`` (others are dropped, not shown)."""
    if not chunk_ids or not project_ids:
        return {}
    # Core SQL on an autocommit connection: this runs on every query; the ORM and the BEGIN/ROLLBACK
    # round trips of a transaction would add milliseconds for a single read.
    with _read_connection() as conn:
        rows = conn.execute(_ROWS_SQL, {"ids": list(chunk_ids), "pids": [int(p) for p in project_ids]}).mappings()
        return {row["id"]: dict(row) for row in rows}


_MARKUP = re.compile(r"[#>*_`|\-]+")


def near_duplicate_key(text: str) -> str:
    """Chunks with the same words in the same order, ignoring case and markdown markup, share a key.

    A document's L0 chunk often repeats its first section (``Title`` + lead vs ``# Title`` + lead), and
    teams copy sections between runbooks; showing both wastes a result slot.
    """
    return " ".join(_MARKUP.sub(" ", text.lower()).split())


def fuse_retrieval(retrieval: Retrieval, req: QueryRequest) -> list[FusedHit]:
    """Fuse a retrieval's candidates the way ``req`` asks (the weights of the method that ran)."""
    w_sem, w_lex = resolve_weights(req)
    if retrieval.method == "semantic":
        w_sem, w_lex = 1.0, 0.0
    elif retrieval.method == "lexical":
        w_sem, w_lex = 0.0, 1.0
    return fuse(retrieval.semantic, retrieval.lexical, fusion=req.fusion, w_sem=w_sem, w_lex=w_lex)


def assemble(
    retrieval: Retrieval, req: QueryRequest, settings: Settings | None = None
) -> QueryResult:
    """Fuse, read the rows back (scoped), dedupe, facet, cut to the limit and add context."""
    settings = settings or get_settings()
    started = time.perf_counter()
    fused = fuse_retrieval(retrieval, req)
    rows = fetch_rows([h.chunk_id for h in fused], list(retrieval.project_ids.values()))
    candidates: list[Candidate] = []
    seen_text: set[tuple[str, str]] = set()
    for hit in fused:
        row = rows.get(hit.chunk_id)
        if row is None:  # deleted since it was indexed, or (never) another project's chunk
            continue
        if req.dedupe:
            key = (row["project"], near_duplicate_key(row["text"]))
            if key in seen_text:
                continue
            seen_text.add(key)
        candidates.append(Candidate(hit, row))
    facets = compute_facets(
        FacetRow(c.row["level"], c.row["source"], c.row["updated_at"], tuple(c.row["tags"] or ()))
        for c in candidates
    )
    results = candidates[: req.limit]
    if req.context_chunks > 0 and results:
        _add_context(results, req.context_chunks, settings)
    fusion_ms = (time.perf_counter() - started) * 1000
    metrics = {
        "embed_ms": retrieval.metrics["embed_ms"],
        "semantic_ms": retrieval.metrics["semantic_ms"],
        "lexical_ms": retrieval.metrics["lexical_ms"],
        "fusion_ms": round(fusion_ms, 2),
        "total_ms": round(retrieval.metrics["retrieve_ms"] + fusion_ms, 2),
        "semantic_engine": retrieval.metrics["semantic_engine"],
        "lexical_engine": retrieval.metrics["lexical_engine"],
        "candidates": {**retrieval.metrics["candidates"], "fused": len(candidates)},
    }
    return QueryResult(req, retrieval, results, facets, metrics, settings)


def _add_context(results: list[Candidate], radius: int, settings: Settings) -> None:
    anchors = [(int(c.row["document_id"]), int(c.row["ordinal"])) for c in results]
    with session_scope() as session:
        around = fetch_neighbours(session, anchors, radius)
    for cand, key in zip(results, anchors, strict=True):
        before, after = around.get(key, ([], []))
        row = cand.row
        row["context"] = {
            "previous": [n.to_dict() for n in before],
            "next": [n.to_dict() for n in after],
            "section_title": row["section_title"],
            "breadcrumb_full": breadcrumb_full(row["project"], row["breadcrumb"], row["section_title"]),
            "vault_url": vault_url(settings, row["project"], row["source"], row["anchor"]),
        }


def run_query(req: QueryRequest, settings: Settings | None = None) -> QueryResult:
    """Run one search end to end. Raises :class:`QueryError` (bad request) or :class:`SearchUnavailable`."""
    settings = settings or get_settings()
    return assemble(retrieve(req, settings), req, settings)


def parse_since(value: str | datetime | None) -> datetime | None:
    """``updated_since`` from an ISO 8601 date or date-time (naive = UTC); raises :class:`QueryError`."""
    from datetime import UTC

    if value is None or isinstance(value, datetime):
        return value
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(f"updated_since {value!r} is not an ISO 8601 date or date-time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
