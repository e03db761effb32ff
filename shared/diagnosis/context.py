"""Three-tier context for a failure: what the team already knows, most specific first.

1. **lessons** (confidence ``high``): lessons recorded for exactly this signature (``sig_sha``) or
   symptom (``sym_sha``); when no key matches exactly, lessons of the same tool whose symptom keywords
   include all of the query's (confidence ``medium``, ``match: "keywords"``);
2. **project** (``medium``): hybrid search (:func:`shared.search.query.run_query`) in the caller's
   project(s);
3. **reference** (``low``): the same search in the shared reference corpus
   (``MEM_REFERENCE_PROJECT``), which every reader may search.

The first tier with an answer is returned; ``tiers_tried`` says what each tier did. Search tiers only
answer with hits whose cosine similarity to the query reaches ``MEM_CONTEXT_MIN_SIMILARITY`` (hybrid
scores are min-max normalised per query, so the best hit always scores 1 and says nothing about
relevance); a lexical-only search (short identifier queries, embedder down) keeps its BM25 hits.

Pure of HTTP: the API passes the projects the principal may see; the diagnosis job passes its own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from shared.config import Settings, get_settings
from shared.db.engine import session_scope
from shared.diagnosis.classify import resolve_tool
from shared.diagnosis.lessons import find_lessons
from shared.diagnosis.signature import Signature, extract_signature
from shared.search.normalise import MAX_QUERY_CHARS
from shared.search.query import QueryError, QueryRequest, SearchUnavailable, run_query

log = logging.getLogger(__name__)

Confidence = Literal["high", "medium", "low", "none"]
DEFAULT_LIMIT = 5
MAX_LIMIT = 50
# Placeholders that shared.noise puts in a normalised line: noise for a search engine.
_PLACEHOLDER_RE = re.compile(r"<[a-z_]+>")


@dataclass(frozen=True)
class ContextRequest:
    """One context lookup. ``lesson_projects`` None = every project's lessons (an unscoped caller)."""

    tool: str = "auto"
    query: str | None = None
    log: str | None = None
    signature: Signature | None = None  # already extracted (the diagnosis job); else taken from ``log``
    sig_sha: str | None = None  # a known signature hash (used when the log gives none)
    lesson_projects: Sequence[str] | None = ()
    search_projects: Sequence[str] = ()
    reference_project: str | None = None
    limit: int = DEFAULT_LIMIT
    optimize: bool = False
    bearer_token: str | None = None


@dataclass
class ContextResult:
    """The answer: the tier that answered, its confidence, its results and what every tier did."""

    tier: int | None
    confidence: Confidence
    results: list[dict[str, Any]]
    tiers_tried: list[dict[str, Any]]
    signature: Signature | None = None
    query: str | None = None
    warnings: list[str] = field(default_factory=list)
    optimizer: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON response of ``/memory/context``."""
        sig = self.signature
        return {
            "tier": self.tier,
            "confidence": self.confidence,
            "results": self.results,
            "tiers_tried": self.tiers_tried,
            "query": self.query,
            "signature": None if sig is None else {
                "found": sig.found, "tool": sig.tool, "sig_sha": sig.sig_sha, "normalised": sig.normalised,
                "matched_line": sig.matched_line, "rule": sig.rule,
            },
            "warnings": self.warnings,
            **({"optimizer": self.optimizer} if self.optimizer is not None else {}),
        }


def search_text(query: str | None, signature: Signature | None) -> str | None:
    """What the search tiers look for: the caller's words, else the signature line without placeholders."""
    if query and query.strip():
        return query.strip()[:MAX_QUERY_CHARS]
    if signature is not None and signature.found and signature.normalised:
        text = " ".join(_PLACEHOLDER_RE.sub(" ", signature.normalised).split())
        return text[:MAX_QUERY_CHARS] or None
    return None


def _lesson_results(views: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "source": v.source or f"lesson:{v.id}",
            "title": v.title,
            "content": v.solution,
            "solution": v.solution,
            "score": round(v.rank_score, 4),
            "lesson_id": v.id,
            "project": v.project,
            "match": v.match,
            "success_rate": v.success_rate,
        }
        for v in views
    ]


def _search(
    text: str, projects: Sequence[str], req: ContextRequest, settings: Settings
) -> tuple[list[dict[str, Any]], list[str]]:
    """Relevant hits of one search tier, and the search's warnings."""
    result = run_query(
        QueryRequest(query=text, projects=list(projects), limit=req.limit, explain=False,
                     bearer_token=req.bearer_token),
        settings,
    )
    lexical_only = result.retrieval.method == "lexical"
    hits = []
    for cand in result.results:
        hit = cand.hit
        relevant = (
            hit.semantic_raw is not None and hit.semantic_raw >= settings.context_min_similarity
        ) or (lexical_only and hit.lexical_raw is not None)
        if not relevant:
            continue
        row = cand.row
        hits.append({
            "source": row["source"],
            "title": row["section_title"] or row["source"],
            "content": row["text"],
            "score": round(hit.score, 6),
            "similarity": None if hit.semantic_raw is None else round(hit.semantic_raw, 4),
            "project": row["project"],
            "anchor": row["anchor"],
        })
    return hits, list(result.warnings)


def _search_tier(
    tier: int, name: str, text: str | None, projects: Sequence[str], req: ContextRequest, settings: Settings,
    warnings: list[str],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    entry: dict[str, Any] = {"tier": tier, "name": name, "projects": list(projects), "results": 0}
    if text is None:
        entry["skipped"] = "nothing to search for (no query, and no signature in the log)"
        return entry, []
    if not projects:
        entry["skipped"] = "no project to search" if name == "project" else "no reference project is set up"
        return entry, []
    try:
        hits, engine_warnings = _search(text, projects, req, settings)
    except (QueryError, SearchUnavailable) as exc:
        entry["error"] = str(exc)
        warnings.append(f"tier {tier} ({name}): {exc}")
        return entry, []
    warnings.extend(f"tier {tier} ({name}): {w}" for w in engine_warnings)
    entry["results"] = len(hits)
    return entry, hits


def _optimize(results: list[dict[str, Any]], query: str | None, settings: Settings) -> dict[str, Any] | None:
    """Compress each result's ``content`` with the context optimizer, when the service has one."""
    try:
        from shared.optimizer import CCRUnavailable, InputChunk, optimize_chunks
    except ImportError:
        return None
    try:
        out = optimize_chunks(
            [InputChunk(text=r["content"], id=str(i), project=r.get("project")) for i, r in enumerate(results)],
            query=query, settings=settings,
        )
    except (ValueError, CCRUnavailable) as exc:  # too large, or the CCR store is down: results stay as they are
        return {"skipped": str(exc)}
    for item, chunk in zip(results, out.chunks, strict=True):
        item["content"] = chunk.text
        if chunk.ccr_hash:
            item["ccr_hash"] = chunk.ccr_hash
    return dict(out.to_dict()["totals"])


def build_context(req: ContextRequest, settings: Settings | None = None) -> ContextResult:
    """Try the three tiers in order and return the first that answers (see the module docstring).

    Raises ``UnknownToolError`` for an unknown tool and ``ValueError`` when there is nothing to look
    for (no query and no log).
    """
    settings = settings or get_settings()
    name = resolve_tool(req.tool)
    if not (req.query and req.query.strip()) and req.log is None and req.signature is None and not req.sig_sha:
        raise ValueError("give a query (symptom text), a sig_sha or a log")
    signature = req.signature
    if signature is None and req.log is not None:
        signature = extract_signature(req.log, name)
    if signature is not None and signature.found:
        name = signature.tool
    lesson_tool = "generic" if name == "auto" else name
    limit = max(1, min(req.limit, MAX_LIMIT))
    req = ContextRequest(**{**req.__dict__, "limit": limit})
    text = search_text(req.query, signature)
    warnings: list[str] = []
    tiers: list[dict[str, Any]] = []

    # Tier 1: lessons. The symptom comes from the caller's words, else from the signature line.
    symptom_text = req.query if req.query and req.query.strip() else (signature.normalised if signature else None)
    sig_sha = signature.sig_sha if signature is not None and signature.found else req.sig_sha
    with session_scope() as session:
        lessons = find_lessons(session, req.lesson_projects, tool=lesson_tool, sig_sha=sig_sha,
                               text=symptom_text, limit=limit)
    tiers.append({"tier": 1, "name": "lessons", "results": len(lessons)})
    answer: tuple[int, Confidence, list[dict[str, Any]]] | None = None
    if lessons:
        exact = any(v.match in ("sig_sha", "sym_sha") for v in lessons)
        answer = (1, "high" if exact else "medium", _lesson_results(lessons))

    # Tier 2: the caller's project(s); tier 3: the shared reference corpus.
    if answer is None:
        search_projects = [p for p in req.search_projects if p != req.reference_project]
        entry, hits = _search_tier(2, "project", text, search_projects, req, settings, warnings)
        tiers.append(entry)
        if hits:
            answer = (2, "medium", hits)
    if answer is None:
        reference = [req.reference_project] if req.reference_project else []
        entry, hits = _search_tier(3, "reference", text, reference, req, settings, warnings)
        tiers.append(entry)
        if hits:
            answer = (3, "low", hits)

    tier, confidence, results = answer if answer is not None else (None, "none", [])
    optimizer = _optimize(results, text, settings) if req.optimize and results else None
    return ContextResult(tier=tier, confidence=confidence, results=results, tiers_tried=tiers,
                         signature=signature, query=text, warnings=warnings, optimizer=optimizer)
