"""``POST /memory/optimize`` (the context optimizer) and ``GET /memory/ccr/<hash>`` (originals back).

Optimizing computes and stores nothing but the CCR originals, so it needs ``memory:read``. Each original
is stored with the request's ``project`` (or, for retrieved chunks, the chunk's own project); an original
without a project is readable only by callers scoped to every project. Reading an original needs read
access to its project, and a caller without it gets the same 404 as for an unknown or expired hash.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, current_app, g, jsonify

from api.contract import endpoint
from api.optimizer_schemas import CCREntryOut, OptimizeRequest, OptimizeResponse
from api.problems import Problem
from shared.catalog import project_exists
from shared.config import Settings
from shared.db.engine import session_scope
from shared.identity.principal import READ, Principal
from shared.optimizer import CCRUnavailable, InputChunk, InputTooLarge, get_ccr_store, optimize_chunks
from shared.optimizer.ccr import CCR_HASH_DIGITS, is_ccr_hash
from shared.optimizer.decode import decode_bytes

bp = Blueprint("optimizer", __name__, url_prefix="/memory")

_CCR_RETRY_AFTER = "5"


def _settings() -> Settings:
    return current_app.config["SETTINGS"]


def _check_project(principal: Principal, project: str, *, must_exist: bool) -> None:
    """403 (the same for a hidden and a missing project) unless the caller may read ``project``."""
    denied = Problem(403, f"no access to project '{project}' (or it does not exist)")
    if not principal.may_see(project):
        raise denied
    if must_exist:
        with session_scope() as session:
            exists = project_exists(session, project)
        if not exists:
            if principal.all_projects:
                raise Problem(400, f"unknown project '{project}'")
            raise denied


def _decoded_chunks(body: OptimizeRequest, limit: int) -> tuple[list[InputChunk], dict[int, str]]:
    """The request's chunks as optimizer input; base64 content decoded (bounded before decoding)."""
    chunks: list[InputChunk] = []
    notes: dict[int, str] = {}
    for position, item in enumerate(body.chunks or []):
        if item.base64 is not None:
            # 4 base64 characters are 3 bytes: refuse before allocating the decoded copy.
            if len(item.base64) // 4 * 3 > limit:
                raise InputTooLarge(
                    f"input is over {limit} bytes (MEM_OPTIMIZER_MAX_INPUT_BYTES); split it or raise the limit")
            try:
                data = base64.b64decode(item.base64, validate=True)
            except (binascii.Error, ValueError):
                raise Problem(400, f"chunks.{position}.base64: not valid base64") from None
            text, note = decode_bytes(data)
            if note:
                notes[position] = note
        else:
            text = item.text or ""
        chunks.append(InputChunk(text=text, id=item.id, content_type=item.type))
    return chunks, notes


def _retrieve(principal: Principal, body: OptimizeRequest, settings: Settings) -> tuple[list[InputChunk], dict[str, Any]]:
    """Search ``body.project`` for ``body.query`` (hybrid) and return the results as optimizer input."""
    from shared.search.query import QueryError, QueryRequest, SearchUnavailable, run_query

    assert body.project is not None and body.query is not None  # the schema guarantees both
    _check_project(principal, body.project, must_exist=True)
    request = QueryRequest(query=body.query, projects=principal.visible([body.project]), limit=body.limit,
                           explain=False, bearer_token=g.get("bearer_token"))
    try:
        result = run_query(request, settings)
    except QueryError as exc:
        raise Problem(400, str(exc)) from None
    except SearchUnavailable as exc:
        raise Problem(503, str(exc), warnings=exc.warnings) from None
    chunks = [InputChunk(text=c.row["text"], id=str(c.row["id"]), project=c.row["project"]) for c in result.results]
    info = {"search_method": result.retrieval.method, "results": len(chunks), "warnings": list(result.warnings),
            "sources": {str(c.row["id"]): c.row["source"] for c in result.results}}
    return chunks, info


@endpoint(bp, "/optimize", "POST", summary="Compress context for a prompt (given chunks, or retrieved ones)",
          capability=READ, body=OptimizeRequest, rate_limit="query",
          responses={200: ("optimized chunks with per-chunk stats and totals", OptimizeResponse)})
def optimize(principal: Principal, body: OptimizeRequest):  # type: ignore[no-untyped-def]
    """Detect, compress, align and CCR-mark each chunk; chunks that cannot be compressed safely come back
    unchanged with a ``reason``. With ``MEM_CONTEXT_OPTIMIZER=off`` every chunk comes back unchanged
    (``reason: optimizer_off``)."""
    settings = _settings()
    limit = settings.optimizer_max_input_bytes
    retrieval: dict[str, Any] | None = None
    notes: dict[int, str] = {}
    try:
        if body.chunks is not None:
            if body.project is not None:
                _check_project(principal, body.project, must_exist=False)
            chunks, notes = _decoded_chunks(body, limit)
        else:
            chunks, retrieval = _retrieve(principal, body, settings)
        result = optimize_chunks(chunks, query=body.query, budget_tokens=body.budget_tokens, settings=settings,
                                 project=body.project)
    except InputTooLarge as exc:
        raise Problem(413, str(exc), limit_bytes=limit) from None
    payload = result.to_dict()
    sources = retrieval.pop("sources") if retrieval is not None else {}
    for position, chunk in enumerate(payload["chunks"]):
        if position in notes:
            chunk["decode_note"] = notes[position]
        if chunk["id"] in sources:
            chunk["source"] = sources[chunk["id"]]
    return jsonify({"optimizer": settings.context_optimizer, "project": body.project, **payload,
                    "retrieval": retrieval})


_NOT_FOUND = "no CCR original under this hash (unknown, expired or evicted)"


@endpoint(bp, "/ccr/<ccr_hash>", "GET", summary="The original of a compressed chunk, by its CCR hash",
          capability=READ, rate_limit="query", responses={200: ("the original and its project", CCREntryOut)})
def ccr_original(principal: Principal, ccr_hash: str):  # type: ignore[no-untyped-def]
    """The text a ``<!-- CCR:<hash> -->`` marker stands for, exactly as it was before compression.

    404 for an unknown, expired or evicted hash and for one whose project the caller may not read (the
    same answer, so a hash reveals nothing); 400 for a string that is not a CCR hash (29 decimal
    digits); 503 while the CCR store (Redis) is unreachable.
    """
    if not is_ccr_hash(ccr_hash):
        raise Problem(400, f"a CCR hash is {CCR_HASH_DIGITS} decimal digits")
    settings = _settings()
    if not settings.ccr_enabled:
        raise Problem(404, _NOT_FOUND)
    try:
        entry = get_ccr_store(settings).get(ccr_hash)
    except CCRUnavailable as exc:
        raise Problem(503, str(exc), headers={"Retry-After": _CCR_RETRY_AFTER}) from None
    visible = entry is not None and (
        principal.all_projects if entry.project is None else principal.may_see(entry.project))
    if entry is None or not visible:
        raise Problem(404, _NOT_FOUND)
    created = datetime.fromtimestamp(entry.created_at, tz=UTC).isoformat()
    return jsonify({"hash": ccr_hash, "project": entry.project, "original": entry.original, "created_at": created})
