"""Browse and read the vault (projects, folders, files with sections), and ``vault generate``.

A search hit's ``source`` and ``anchor`` resolve here: ``GET /memory/vault/<project>/<source>`` returns the
file with its ``sections``, one of which has that ``anchor``; ``?highlight=<chunk id>`` marks it directly.
Paths are checked by :func:`shared.vault.paths.resolve_vault_path` whatever their encoding.
"""

from __future__ import annotations

import re

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from api.auth import require_project
from api.contract import endpoint
from api.problems import Problem
from api.schemas import JobOut
from api.vault_schemas import (
    DirectoryListing,
    DirectoryQuery,
    FileQuery,
    GenerateRequest,
    VaultFileOut,
    VaultProjectList,
)
from shared.catalog import project_exists
from shared.config import Settings
from shared.db.engine import session_scope
from shared.identity.principal import READ, WRITE, Principal
from shared.jobs.broker import dispatch
from shared.vault.browse import (
    VaultFileRefused,
    VaultNotFound,
    apply_highlight,
    etag_for,
    list_directory,
    list_projects,
    locate_chunk,
    read_file,
)
from shared.vault.generate import GENERATE_STEP, submit_generate
from shared.vault.paths import UnsafePath

bp = Blueprint("vault", __name__, url_prefix="/memory")

_CHUNK_ID = re.compile(r"[0-9a-f]{32}")


def _settings() -> Settings:
    return current_app.config["SETTINGS"]


def _refused(exc: UnsafePath) -> Problem:
    return Problem(400, f"path refused: {exc}")


def _check_decoded(*values: str) -> None:
    """Refuse URL parts the HTTP layer could not decode as UTF-8 (werkzeug turns such bytes into U+FFFD)."""
    if any("\ufffd" in value for value in values):
        raise Problem(400, "path refused: it contains percent-encoded bytes that are not valid UTF-8")


@endpoint(bp, "/vault", "GET", summary="Vault projects with file counts and last change (from git)",
          capability=READ, responses={200: ("projects", VaultProjectList)})
def projects(principal: Principal):  # type: ignore[no-untyped-def]
    """Every project folder of the vault the caller may see."""
    return jsonify({"projects": list_projects(_settings().resolved_vault_dir, principal)})


@endpoint(bp, "/vault/<project>", "GET", summary="One folder level of a project: folders and files with git metadata",
          capability=READ, query=DirectoryQuery, responses={200: ("the folder", DirectoryListing)})
def directory(project: str, principal: Principal, query: DirectoryQuery):  # type: ignore[no-untyped-def]
    """List a folder of a project (``?path=runbooks``; the project's top when absent)."""
    _check_decoded(project)
    require_project(principal, project)
    try:
        return jsonify(list_directory(_settings().resolved_vault_dir, project, query.path))
    except UnsafePath as exc:
        raise _refused(exc) from None
    except VaultNotFound as exc:
        raise Problem(404, str(exc)) from None


@endpoint(bp, "/vault/<project>/<path:file>", "GET", summary="A vault file: content, sections, last commit, ETag",
          capability=READ, query=FileQuery, responses={200: ("the file", VaultFileOut), 304: ("not modified", None)},
          rate_limit="query")
def read(project: str, file: str, principal: Principal, query: FileQuery):  # type: ignore[no-untyped-def]
    """Read a file; ``?highlight=<chunk id>`` marks the section a search hit came from."""
    _check_decoded(project, file)
    require_project(principal, project)
    settings = _settings()
    location = None
    if query.highlight is not None:
        if not _CHUNK_ID.fullmatch(query.highlight):
            raise Problem(400, "highlight must be a chunk id (32 lowercase hex digits)")
        with session_scope() as session:
            location = locate_chunk(session, principal, query.highlight)
        if location is None or location.project != project or location.source != file:
            raise Problem(404, f"no chunk {query.highlight} in {project}/{file}")
    try:
        data = read_file(settings.resolved_vault_dir, project, file, max_bytes=settings.max_document_bytes)
    except UnsafePath as exc:
        raise _refused(exc) from None
    except VaultNotFound as exc:
        raise Problem(404, str(exc)) from None
    except VaultFileRefused as exc:
        raise Problem(exc.status, str(exc)) from None
    etag = etag_for(data, query.highlight)
    if request.if_none_match.contains(etag):
        response = Response(status=304)
    else:
        if location is not None:
            apply_highlight(data, location)
        response = jsonify(data)
    response.set_etag(etag)
    # Revalidate every time (the file may change at the next sync), but do let the client keep a copy.
    response.headers["Cache-Control"] = "private, no-cache"
    return response


@endpoint(bp, "/vault/generate", "POST", summary="Write lessons and the skills index into the vault (a vault job)",
          capability=WRITE, body=GenerateRequest, responses={202: ("job accepted", JobOut)},
          rate_limit="ingest", idempotent=True)
def generate(body: GenerateRequest, principal: Principal):  # type: ignore[no-untyped-def]
    """Queue a ``vault`` job: committed locally, or proposed as a pull request when a forge is configured."""
    require_project(principal, body.project)
    with session_scope() as session:
        known = project_exists(session, body.project) or (_settings().resolved_vault_dir / body.project).is_dir()
        if not known:
            raise Problem(404, f"project '{body.project}' does not exist")
        view = submit_generate(session, body.project, principal.subject)
    dispatch(GENERATE_STEP, view.id)
    response = jsonify(view.to_dict())
    response.status_code = 202
    response.headers["Location"] = url_for("ingest.job", job_id=view.id)
    return response
