"""Edit through review (GRC): propose a document change as a pull request, and follow it."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from api.auth import require_project
from api.contract import endpoint
from api.problems import Problem
from api.vault_schemas import DraftOut, DraftRequest, DraftStatusOut, StatusQuery
from shared.config import Settings
from shared.db.engine import session_scope
from shared.forge.client import ForgejoError, ForgejoNotFound, ForgejoUnavailable
from shared.identity.principal import ADMIN, READ, WRITE, Principal
from shared.vault.paths import UnsafePath
from shared.vault.review import (
    DraftRefused,
    ForgeNotConfigured,
    create_draft,
    draft_project,
    draft_status,
    forge_client,
    record_draft,
    split_document_path,
)

bp = Blueprint("grc", __name__, url_prefix="/memory")


def _forge_problem(exc: ForgejoError) -> Problem:
    """The forge failing is a gateway problem, never the caller's: 503 when it is down, 502 otherwise."""
    if isinstance(exc, ForgejoUnavailable):
        return Problem(503, f"the forge is unavailable: {exc}", headers={"Retry-After": "30"})
    return Problem(502, f"the forge refused the request: {exc}")


@endpoint(bp, "/grc/draft", "POST", summary="Propose a document change: branch, commit and pull request",
          capability=WRITE, body=DraftRequest, responses={201: ("pull request opened", DraftOut)},
          rate_limit="ingest", idempotent=True)
def draft(body: DraftRequest, principal: Principal):  # type: ignore[no-untyped-def]
    """Commit ``content`` (null: delete) on ``edit/<user>/<slug>-<timestamp>`` and open a pull request."""
    settings: Settings = current_app.config["SETTINGS"]
    try:
        project, inside = split_document_path(settings.resolved_vault_dir, body.document_path)
    except UnsafePath as exc:
        raise Problem(400, f"document_path refused: {exc}") from None
    require_project(principal, project)
    try:
        with forge_client(settings) as client:
            result = create_draft(
                client, principal, project=project, inside_path=inside, content=body.content,
                message=body.message, base_commit=body.base_commit, max_bytes=settings.max_document_bytes,
            )
    except ForgeNotConfigured as exc:
        raise Problem(503, str(exc)) from None
    except DraftRefused as exc:
        raise Problem(exc.status, str(exc), **exc.extra) from None
    except ForgejoError as exc:
        raise _forge_problem(exc) from None
    with session_scope() as session:
        record_draft(session, principal, project, inside, result)
    response = jsonify(result.to_dict())
    response.status_code = 201
    if result.pr_url:
        response.headers["Location"] = result.pr_url
    return response


@endpoint(bp, "/grc/status", "GET", summary="State, mergeability and CI status of a draft's pull request",
          capability=READ, query=StatusQuery, responses={200: ("the pull request", DraftStatusOut)})
def status(principal: Principal, query: StatusQuery):  # type: ignore[no-untyped-def]
    """Follow a draft: open, merged or closed, mergeable, merged_at and the combined CI status."""
    settings: Settings = current_app.config["SETTINGS"]
    with session_scope() as session:
        project = draft_project(session, query.pr)
    # Drafts opened here are shown to whoever may see their project; other pull requests only to admins.
    if project is not None:
        require_project(principal, project)
    elif not principal.has(ADMIN):
        raise Problem(404, f"no draft #{query.pr}")
    try:
        with forge_client(settings) as client:
            return jsonify(draft_status(client, query.pr))
    except ForgeNotConfigured as exc:
        raise Problem(503, str(exc)) from None
    except ForgejoNotFound:
        raise Problem(404, f"no pull request #{query.pr}") from None
    except ForgejoError as exc:
        raise _forge_problem(exc) from None
