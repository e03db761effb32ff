"""``/memory/query`` and ``/memory/query/with-context``: hybrid search, GET (query string) and POST (JSON)."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, date, datetime
from typing import Any

from flask import Blueprint, current_app, g, jsonify

from api.contract import endpoint
from api.problems import Problem
from api.query_schemas import (
    ContextQueryArgs,
    ContextQueryBody,
    QueryArgs,
    QueryBody,
    QueryFilters,
    QueryResponse,
)
from shared.catalog import project_exists
from shared.config import Settings
from shared.db.engine import session_scope
from shared.identity.principal import READ, Principal
from shared.search.lexical import LexicalFilters
from shared.search.query import QueryError, QueryRequest, SearchUnavailable, run_query

log = logging.getLogger(__name__)

bp = Blueprint("query", __name__, url_prefix="/memory")

RESPONSES = {200: ("ranked results with explanations, facets, route, metrics and warnings", QueryResponse)}


@bp.record_once
def _warm_embedder(state: Any) -> None:
    """Build the embedding model's session in the background, so the first query is not routed
    lexically only because loading the model took longer than the embed timeout."""
    settings: Settings = state.app.config["SETTINGS"]

    def warm() -> None:
        from shared.embedding import get_embedder

        try:
            embedder = get_embedder(settings)
            if embedder is not None:
                embedder.embed(["warm-up"])
        except Exception as exc:  # a broken embedder is reported per query; nothing to do here
            log.warning("embedder warm-up failed", extra={"error": str(exc)})

    if settings.embedder == "local":
        threading.Thread(target=warm, name="embedder-warm-up", daemon=True).start()


def _scope(principal: Principal, project: str) -> list[str]:
    """The projects to search: ``[project]`` if the caller may see it and it exists.

    A scoped caller gets the same 403 for a hidden and a missing project (no existence leak); a
    caller who may see every project is told plainly that the project does not exist (400).
    """
    denied = Problem(403, f"no access to project '{project}' (or it does not exist)")
    if not principal.may_see(project):
        raise denied
    with session_scope() as session:
        exists = project_exists(session, project)
    if not exists:
        if principal.all_projects:
            raise Problem(400, f"unknown project '{project}'")
        raise denied
    return principal.visible([project])


def _filters(filters: QueryFilters | None) -> LexicalFilters:
    if filters is None:
        return LexicalFilters()
    since = filters.updated_since
    if isinstance(since, date) and not isinstance(since, datetime):
        since = datetime(since.year, since.month, since.day, tzinfo=UTC)
    elif isinstance(since, datetime) and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return LexicalFilters(
        levels=tuple(filters.level or ()),
        source_pattern=filters.source_pattern,
        updated_since=since,
        tags=tuple(dict.fromkeys(t.strip() for t in filters.tags or ())),
    )


def _run(principal: Principal, body: QueryBody, filters: QueryFilters | None, context_chunks: int) -> Any:
    settings: Settings = current_app.config["SETTINGS"]
    projects = _scope(principal, body.project)
    weights = (body.weights.semantic, body.weights.lexical) if body.weights else None
    request = QueryRequest(
        query=body.query,
        projects=projects,
        limit=body.limit,
        method=body.method,
        weights=weights,
        fusion=body.fusion,
        candidates=body.candidates,
        filters=_filters(filters),
        explain=body.explain,
        context_chunks=context_chunks,
        bearer_token=g.get("bearer_token"),
    )
    try:
        result = run_query(request, settings)
    except QueryError as exc:
        raise Problem(400, str(exc)) from None
    except SearchUnavailable as exc:
        raise Problem(503, str(exc), warnings=exc.warnings) from None
    return jsonify(result.to_dict(project=body.project))


def _from_args(query: QueryArgs) -> tuple[QueryBody, QueryFilters | None]:
    try:
        weights = query.parsed_weights()
        filters = query.parsed_filters()
    except ValueError as exc:
        raise Problem(400, str(exc)) from None
    body = QueryBody.model_construct(
        query=query.query, project=query.project, limit=query.limit, method=query.method, weights=weights,
        fusion=query.fusion, candidates=query.candidates, filters=filters, explain=query.explain,
    )
    return body, filters


@endpoint(bp, "/query", "GET", summary="Hybrid search (query string)", capability=READ, query=QueryArgs,
          responses=RESPONSES, rate_limit="query")
def query_get(principal: Principal, query: QueryArgs):  # type: ignore[no-untyped-def]
    """Search a project by meaning and exact terms, with explanations, facets and metrics."""
    body, filters = _from_args(query)
    return _run(principal, body, filters, 0)


@endpoint(bp, "/query", "POST", summary="Hybrid search (JSON body)", capability=READ, body=QueryBody,
          responses=RESPONSES, rate_limit="query")
def query_post(principal: Principal, body: QueryBody):  # type: ignore[no-untyped-def]
    """Search a project by meaning and exact terms, with explanations, facets and metrics."""
    return _run(principal, body, body.filters, 0)


@endpoint(bp, "/query/with-context", "GET", summary="Hybrid search with neighbouring chunks (query string)",
          capability=READ, query=ContextQueryArgs, responses=RESPONSES, rate_limit="query")
def with_context_get(principal: Principal, query: ContextQueryArgs):  # type: ignore[no-untyped-def]
    """Like ``/memory/query``; each result also carries its previous/next chunks and a vault link."""
    body, filters = _from_args(query)
    return _run(principal, body, filters, query.context_chunks)


@endpoint(bp, "/query/with-context", "POST", summary="Hybrid search with neighbouring chunks (JSON body)",
          capability=READ, body=ContextQueryBody, responses=RESPONSES, rate_limit="query")
def with_context_post(principal: Principal, body: ContextQueryBody):  # type: ignore[no-untyped-def]
    """Like ``/memory/query``; each result also carries its previous/next chunks and a vault link."""
    return _run(principal, body, body.filters, body.context_chunks)
