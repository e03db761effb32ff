"""Failure diagnosis over HTTP: lessons, three-tier context, and diagnosis jobs.

Project isolation: every lesson read is limited to the projects the caller may see; a hidden lesson's
id answers 404 exactly like a missing one. The reference corpus (``MEM_REFERENCE_PROJECT``) is tier 3 of the
context, searched only for callers who may see that project like any other.
"""

from __future__ import annotations

import base64
import binascii

from flask import Blueprint, current_app, g, jsonify, url_for
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from api.auth import require_project
from api.contract import endpoint
from api.diagnosis_schemas import (
    ContextArgs,
    ContextBody,
    ContextOut,
    DiagnoseBody,
    LessonCreate,
    LessonList,
    LessonListArgs,
    LessonOut,
    LogFields,
    OutcomeBody,
)
from api.idempotency import idempotency_key
from api.problems import Problem
from api.schemas import JobOut
from shared.catalog import project_exists
from shared.config import Settings
from shared.db.engine import session_scope
from shared.db.models import Project
from shared.diagnosis import KNOWN_TOOLS, UnknownToolError, resolve_tool
from shared.diagnosis.context import ContextRequest, build_context
from shared.diagnosis.job import DIAGNOSIS_STEP, submit_diagnosis
from shared.diagnosis.lessons import (
    LessonError,
    LessonNotFound,
    get_lesson,
    lesson_keys,
    list_lessons,
    record_lesson,
    record_outcome,
)
from shared.identity.principal import READ, WRITE, Principal
from shared.jobs import store
from shared.jobs.broker import dispatch

bp = Blueprint("diagnosis", __name__, url_prefix="/memory")

MAX_LESSON_ID = 2**63 - 1  # BIGINT: a larger id cannot exist (and must not reach the database)


def _tool(name: str) -> str:
    """The canonical tool name, or a 400 listing the known tools."""
    try:
        return resolve_tool(name)
    except UnknownToolError as exc:
        raise Problem(400, str(exc), known_tools=["auto", *KNOWN_TOOLS]) from None


def _log_text(fields: LogFields, *, required: bool) -> str | None:
    """The log of a request as text: base64 decoded, bad UTF-8 and NUL bytes replaced; 400 when empty."""
    if fields.log_base64 is not None:
        try:
            raw = base64.b64decode(fields.log_base64, validate=True)
        except (binascii.Error, ValueError):
            raise Problem(400, "log_base64 is not valid base64") from None
        text: str | None = raw.decode("utf-8", errors="replace")
    else:
        text = fields.log
    if text is None:
        if required:
            raise Problem(400, "give the CI log as log (text) or log_base64")
        return None
    if not text.strip():
        raise Problem(400, "the log is empty")
    # NUL cannot be stored in PostgreSQL text or JSON; it is a replacement character like any bad byte.
    return text.replace("\x00", "\ufffd")


def _lesson_scope(principal: Principal, project: str | None) -> list[str] | None:
    """Projects whose lessons the caller may read: ``[project]`` (403 if hidden), else all it may see."""
    if project is not None:
        require_project(principal, project)
        return [project]
    return None if principal.projects is None else sorted(principal.projects)


def _settings() -> Settings:
    return current_app.config["SETTINGS"]


# --- lessons -----------------------------------------------------------------------------------------


@endpoint(bp, "/lessons", "POST", summary="Record a lesson (a fix for a failure)", capability=WRITE,
          body=LessonCreate, responses={201: ("lesson recorded", LessonOut), 200: ("the same lesson exists", LessonOut)},
          idempotent=True)
def create_lesson(body: LessonCreate, principal: Principal):  # type: ignore[no-untyped-def]
    """Remember a fix, keyed by the log's signature, a ``sig_sha`` and/or a symptom text."""
    require_project(principal, body.project)
    tool = _tool(body.tool)
    log = _log_text(body, required=False)
    try:
        keys = lesson_keys(tool, log=log, sig_sha=body.sig_sha, symptom=body.symptom)
        with session_scope() as session:
            view, created = record_lesson(
                session, project=body.project, keys=keys, title=body.title, solution=body.solution,
                source=body.source, created_by=principal.subject,
            )
    except LessonError as exc:
        raise Problem(400, str(exc)) from None
    response = jsonify(view.to_dict())
    response.status_code = 201 if created else 200
    response.headers["Location"] = url_for("diagnosis.show_lesson", lesson_id=view.id)
    return response


@endpoint(bp, "/lessons/<int:lesson_id>", "GET", summary="One lesson", capability=READ,
          responses={200: ("the lesson", LessonOut)})
def show_lesson(lesson_id: int, principal: Principal):  # type: ignore[no-untyped-def]
    """A lesson of a project the caller may see (404 for a hidden one, as for a missing one)."""
    if lesson_id > MAX_LESSON_ID:
        raise Problem(404, f"no lesson {lesson_id}")
    try:
        with session_scope() as session:
            view = get_lesson(session, lesson_id, _lesson_scope(principal, None))
    except LessonNotFound as exc:
        raise Problem(404, str(exc)) from None
    return jsonify(view.to_dict())


@endpoint(bp, "/lessons/<int:lesson_id>/outcome", "POST", summary="Report whether a lesson's fix worked",
          capability=WRITE, body=OutcomeBody, responses={200: ("the lesson with its new counts", LessonOut)},
          idempotent=True)
def lesson_outcome(lesson_id: int, body: OutcomeBody, principal: Principal):  # type: ignore[no-untyped-def]
    """Count one success or failure; send an ``Idempotency-Key`` so a retried report counts once."""
    if lesson_id > MAX_LESSON_ID:
        raise Problem(404, f"no lesson {lesson_id}")
    try:
        with session_scope() as session:
            view = record_outcome(session, lesson_id, body.worked, _lesson_scope(principal, None))
    except LessonNotFound as exc:
        raise Problem(404, str(exc)) from None
    return jsonify(view.to_dict())


@endpoint(bp, "/lessons", "GET", summary="Find lessons by signature, symptom, project or tool", capability=READ,
          query=LessonListArgs, responses={200: ("matching lessons, best-rated first", LessonList)})
def lessons(query: LessonListArgs, principal: Principal):  # type: ignore[no-untyped-def]
    """Lessons of the projects the caller may see; every filter given must match."""
    tool = _tool(query.tool) if query.tool else None
    scope = _lesson_scope(principal, query.project)
    with session_scope() as session:
        views = list_lessons(
            session, scope, sig_sha=query.sig_sha.lower() if query.sig_sha else None,
            sym_sha=query.sym_sha.lower() if query.sym_sha else None, tool=tool, limit=query.limit,
        )
    return jsonify({"count": len(views), "lessons": [v.to_dict() for v in views]})


# --- context -----------------------------------------------------------------------------------------


def _search_projects(principal: Principal, project: str | None) -> list[str]:
    """Existing projects to search in tier 2: ``project`` (403 if hidden), else every visible one."""
    with session_scope() as session:
        if project is not None:
            require_project(principal, project)
            return [project] if project_exists(session, project) else []
        stmt = select(Project.name).order_by(Project.name)
        if principal.projects is not None:
            stmt = stmt.where(Project.name.in_(sorted(principal.projects)))
        return [name for name in session.scalars(stmt) if principal.may_see(name)]


def _reference(settings: Settings, principal: Principal) -> str | None:
    name = settings.reference_project
    if not name or not principal.may_see(name):
        return None
    with session_scope() as session:
        return name if project_exists(session, name) else None


def _context(args: ContextArgs, principal: Principal, log: str | None):  # type: ignore[no-untyped-def]
    settings = _settings()
    tool = _tool(args.tool)
    if args.query is None and args.sig_sha is None and log is None:
        raise Problem(400, "give a query (the failure in words), a sig_sha or a log")
    request = ContextRequest(
        tool=tool, query=args.query, log=log, sig_sha=args.sig_sha.lower() if args.sig_sha else None,
        lesson_projects=_lesson_scope(principal, args.project),
        search_projects=_search_projects(principal, args.project),
        reference_project=_reference(settings, principal), limit=args.limit, optimize=args.optimize,
        bearer_token=g.get("bearer_token"),
    )
    try:
        result = build_context(request, settings)
    except (UnknownToolError, ValueError) as exc:
        raise Problem(400, str(exc)) from None
    return jsonify(result.to_dict())


@endpoint(bp, "/context", "GET", summary="Context for a failure: lessons, then the project, then the reference corpus",
          capability=READ, query=ContextArgs, responses={200: ("the first tier that answered", ContextOut)},
          rate_limit="query")
def context_get(query: ContextArgs, principal: Principal):  # type: ignore[no-untyped-def]
    """Tier 1 lessons (high), tier 2 hybrid search in the project (medium), tier 3 the reference corpus (low)."""
    return _context(query, principal, None)


@endpoint(bp, "/context", "POST", summary="Context for a failure, from a log or a symptom", capability=READ,
          body=ContextBody, responses={200: ("the first tier that answered", ContextOut)}, rate_limit="query")
def context_post(body: ContextBody, principal: Principal):  # type: ignore[no-untyped-def]
    """Like ``GET /memory/context``; a ``log`` adds its failure signature to the lookup."""
    return _context(body, principal, _log_text(body, required=False))


# --- diagnosis jobs ----------------------------------------------------------------------------------


@endpoint(bp, "/diagnose", "POST", summary="Diagnose a failed CI log (a diagnosis job)", capability=WRITE,
          body=DiagnoseBody, responses={202: ("job accepted; poll Location", JobOut)}, rate_limit="query",
          idempotent=True)
def diagnose(body: DiagnoseBody, principal: Principal):  # type: ignore[no-untyped-def]
    """Extract the signature, store the log as evidence in the vault, look up lessons, build the context."""
    require_project(principal, body.project)
    tool = _tool(body.tool)
    log = _log_text(body, required=True) or ""
    key = idempotency_key()
    try:
        view, created = submit_diagnosis(project=body.project, tool=tool, log_text=log,
                                         submitted_by=principal.subject, idempotency_key=key)
    except store.JobConflict as exc:
        raise Problem(422, str(exc)) from None
    except IntegrityError:  # the same key raced: the winner's job is the answer
        view, created = submit_diagnosis(project=body.project, tool=tool, log_text=log,
                                         submitted_by=principal.subject, idempotency_key=key)
    if created:
        dispatch(DIAGNOSIS_STEP, view.id)
    response = jsonify(view.to_dict())
    response.status_code = 202
    response.headers["Location"] = url_for("ingest.job", job_id=view.id)
    return response
