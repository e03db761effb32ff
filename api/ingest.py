"""Ingest jobs: submit (202 + Location) and poll."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, url_for

from api.auth import require_project
from api.contract import endpoint
from api.idempotency import idempotency_key
from api.problems import Problem
from api.schemas import DirectorySource, IngestRequest, JobOut
from shared.config import Settings
from shared.db.engine import session_scope
from shared.identity.principal import READ, WRITE, Principal
from shared.ingest.pipeline import INGEST_KIND
from shared.ingest.sources import BadDocument, check_document_path
from shared.jobs import store
from shared.jobs.broker import dispatch

bp = Blueprint("ingest", __name__, url_prefix="/memory")


def _directory_payload(source: DirectorySource, settings: Settings) -> dict[str, object]:
    root = settings.resolved_vault_dir
    rel = source.path.strip("/")
    if "\x00" in rel or "\\" in rel or any(part in ("..", "") or part.startswith(".") for part in rel.split("/")):
        raise Problem(400, "source.path must be a plain relative path inside the vault (no '..', dotfiles or backslashes)")
    target = (root / rel).resolve()
    if target != root and root not in target.parents:
        raise Problem(400, "source.path must stay inside the vault")
    if not target.is_dir():
        raise Problem(400, f"source.path '{rel}' is not a directory in the vault")
    return {"type": "directory", "path": str(target)}


def submit_ingest(body: IngestRequest, principal: Principal, key: str | None) -> tuple[dict[str, object], bool]:
    """Create (or replay) an ingest job and dispatch its first step; returns ``(job json, created)``."""
    settings: Settings = current_app.config["SETTINGS"]
    if principal.projects is not None and body.project not in principal.projects:
        require_project(principal, body.project)
    source = body.source.model_dump()
    if source["type"] == "inline":
        for i, doc in enumerate(source["documents"]):
            try:
                doc["path"] = check_document_path(doc["path"])
            except BadDocument as exc:
                raise Problem(400, f"source.documents[{i}]: {exc}") from None
            if "\x00" in doc["content"]:
                raise Problem(400, f"source.documents[{i}]: content contains a NUL byte")
    if source["type"] == "directory":
        source = _directory_payload(body.source, settings)  # type: ignore[arg-type]
    try:
        with session_scope() as session:
            job, created = store.create_job(
                session,
                kind=INGEST_KIND,
                first_step="ingest",
                project=body.project,
                payload={"source": source},
                submitted_by=principal.subject,
                idempotency_key=key,
            )
            view = store.JobView.of(job)
    except store.JobConflict as exc:
        raise Problem(422, str(exc)) from None
    if created:
        dispatch("ingest", view.id)
    return view.to_dict(), created


@endpoint(bp, "/ingest", "POST", summary="Submit an ingest job", capability=WRITE, body=IngestRequest,
          responses={202: ("job accepted", JobOut)}, rate_limit="ingest", idempotent=True)
def create(body: IngestRequest, principal: Principal):  # type: ignore[no-untyped-def]
    """Queue documents (inline, a vault directory or a git repository) for chunking, embedding and indexing.

    ``Idempotency-Key`` is honoured twice over: the contract replays the recorded HTTP response, and the
    same key on the job row guarantees one job even after that record expires.
    """
    job, _created = submit_ingest(body, principal, idempotency_key())
    response = jsonify(job)
    response.status_code = 202
    response.headers["Location"] = url_for("ingest.show", job_id=job["id"])
    return response


def visible_job(job_id: str, principal: Principal) -> dict[str, object]:
    """A job the principal may see, or a 404 (the same answer for a job of a hidden project)."""
    with session_scope() as session:
        view = store.get_job(session, job_id)
    # Jobs without a project (vault syncs) touch every project: only callers scoped to all projects see them.
    hidden = principal.projects is not None if view and view.project is None else False
    if view is None or hidden or (view.project is not None and not principal.may_see(view.project)):
        raise Problem(404, f"no job {job_id!r}")
    return view.to_dict()


@endpoint(bp, "/ingest/<job_id>", "GET", summary="Status, progress and result of an ingest job",
          capability=READ, responses={200: ("the job", JobOut)}, rate_limit="jobs")
def show(job_id: str, principal: Principal):  # type: ignore[no-untyped-def]
    """Poll a job."""
    return jsonify(visible_job(job_id, principal))


@endpoint(bp, "/jobs/<job_id>", "GET", summary="Status, progress and result of any job", capability=READ,
          responses={200: ("the job", JobOut)}, rate_limit="jobs")
def job(job_id: str, principal: Principal):  # type: ignore[no-untyped-def]
    """Poll any job (ingest, sync, vault, diagnosis)."""
    return jsonify(visible_job(job_id, principal))
