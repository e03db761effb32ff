"""The ``diagnosis`` job: signature, evidence in the vault, lessons and context for one CI log.

``POST /memory/diagnose`` creates the job (:func:`submit_diagnosis`); the ``diagnosis`` queue runs
:func:`run_diagnosis_step`, which

1. extracts the log's failure signature;
2. stores the log as evidence at full fidelity in ``<vault>/<project>/evidence/<date>-<sig12>.log``
   and commits it when the vault is a git working copy (pushing when it has a remote). A ``.log``, not
   markdown: the bytes stay exactly as received, and ingest (markdown only) leaves megabytes of log
   out of the search index, where they would drown the runbooks;
3. looks up lessons and builds the three-tier context (:mod:`shared.diagnosis.context`) for the job's
   project only.

The job result holds all of it. Re-running the step (a retry, a re-delivered message) writes the same
file name for the same log and makes no second commit.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from shared.catalog import project_exists
from shared.config import Settings, get_settings
from shared.db.engine import session_scope
from shared.db.models import Job
from shared.diagnosis.classify import UnknownToolError, resolve_tool
from shared.diagnosis.context import ContextRequest, build_context
from shared.diagnosis.signature import extract_signature
from shared.ingest.pipeline import JobCancelled
from shared.ingest.sources import SourceError
from shared.jobs import store
from shared.vault.git import GitError
from shared.vault.paths import UnsafePath, relative_posix, resolve_vault_path

log = logging.getLogger(__name__)

DIAGNOSIS_KIND = "diagnosis"
DIAGNOSIS_STEP = "diagnosis"
EVIDENCE_FOLDER = "evidence"
# Same failure, same day, different log: numbered siblings instead of overwriting the first evidence.
MAX_EVIDENCE_SIBLINGS = 100
_STEPS = 3


def submit_diagnosis(
    *, project: str, tool: str, log_text: str, submitted_by: str, idempotency_key: str | None = None
) -> tuple[store.JobView, bool]:
    """Create a ``diagnosis`` job (the caller dispatches it); returns ``(job, created)``.

    Raises ``store.JobConflict`` when the idempotency key was used with another request.
    """
    with session_scope() as session:
        job, created = store.create_job(
            session, kind=DIAGNOSIS_KIND, first_step=DIAGNOSIS_STEP, project=project,
            payload={"tool": tool, "log": log_text}, submitted_by=submitted_by, idempotency_key=idempotency_key,
        )
        return store.JobView.of(job), created


def evidence_name(day: str, sig_sha: str | None, data: bytes, n: int = 1) -> str:
    """``<day>-<sig12>.log`` (``<day>-nosig-<content12>.log`` without a signature); ``-<n>`` for siblings."""
    stem = f"{day}-{sig_sha[:12]}" if sig_sha else f"{day}-nosig-{hashlib.sha256(data).hexdigest()[:12]}"
    return f"{stem}.log" if n == 1 else f"{stem}-{n}.log"


def _same_file(path: Path, data: bytes) -> bool:
    """True when ``path`` holds exactly ``data`` (compared by size first, then in blocks)."""
    if path.stat().st_size != len(data):
        return False
    block = 1 << 20
    with path.open("rb") as handle:
        for offset in range(0, len(data), block):
            if handle.read(block) != data[offset : offset + block]:
                return False
    return True


def write_evidence(root: Path, project: str, day: str, sig_sha: str | None, data: bytes) -> tuple[str, bool]:
    """Write ``data`` under ``<root>/<project>/evidence/``; returns (path inside the project, written).

    A file already holding the same bytes is reused (``written`` False): retries write nothing.
    """
    for n in range(1, MAX_EVIDENCE_SIBLINGS + 1):
        rel = f"{EVIDENCE_FOLDER}/{evidence_name(day, sig_sha, data, n)}"
        try:
            target = resolve_vault_path(root, project, rel)
        except UnsafePath as exc:
            raise SourceError(f"cannot store the evidence: {exc}") from None
        if target.exists():
            if _same_file(target, data):
                return rel, False
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)  # atomic: a reader never sees half a log
        return rel, True
    raise SourceError(f"more than {MAX_EVIDENCE_SIBLINGS} different logs with this signature today; not storing more")


def store_evidence(settings: Settings, project: str, day: str, sig_sha: str | None, data: bytes) -> dict[str, Any]:
    """Write the evidence file and commit it when the vault is a git working copy.

    A commit or push that fails is reported in ``warning`` rather than failing the diagnosis: the
    answer matters more to the caller than the audit copy, and the file stays on disk.
    """
    from shared.vault.review import COMMITTER
    from shared.vault.sync import vault_lock, vault_repo

    root = settings.resolved_vault_dir
    root.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"bytes": len(data), "commit": None}
    with vault_lock(settings):
        rel, written = write_evidence(root, project, day, sig_sha, data)
        out["path"] = f"{project}/{rel}"
        out["written"] = written
        repo = vault_repo(settings)
        if not repo.is_repo():
            out["committed"] = False
            return out
        try:
            vault_rel = relative_posix(root, resolve_vault_path(root, project, rel))
            commit = repo.commit_paths(
                [vault_rel], f"Evidence for a {project} CI failure ({rel.rsplit('/', 1)[-1]})",
                author_name=COMMITTER.name, author_email=COMMITTER.email,
            )
            if commit is None:  # a retry: the same bytes were committed before
                info = repo.last_commit(vault_rel)
                commit = info.sha if info else None
            out["commit"] = commit
            if commit is not None and settings.vault_remote:
                repo.push(settings.vault_branch)
        except GitError as exc:
            # A later sync resets the working copy to the remote: an unpushed commit is then only in the reflog.
            out["warning"] = f"evidence written but not committed or not pushed: {exc}"
        out["committed"] = out["commit"] is not None
    return out


def _progress(job_id: str, done: int, step: str) -> None:
    with session_scope() as session:
        store.report_progress(session, job_id, done=done, total=_STEPS, step=step)


def run_diagnosis_step(job_id: str) -> None:
    """The ``diagnosis`` step: signature, evidence, lessons and context; the job result holds them."""
    with session_scope() as session:
        job = store.claim(session, job_id, DIAGNOSIS_STEP)
        if job is None:
            return
        project = job.project or ""
        tool, log_text = job.payload.get("tool") or "auto", job.payload.get("log") or ""
        day = job.created_at.date().isoformat() if isinstance(job.created_at, datetime) else "undated"
    settings = get_settings()
    try:
        resolve_tool(tool)
    except UnknownToolError as exc:
        raise SourceError(str(exc)) from None
    signature = extract_signature(log_text, tool)
    _progress(job_id, 1, "evidence")
    evidence = store_evidence(settings, project, day, signature.sig_sha, log_text.encode("utf-8", "replace"))
    _progress(job_id, 2, "context")
    with session_scope() as session:
        searchable = [project] if project_exists(session, project) else []
    reference = settings.reference_project
    with session_scope() as session:
        reference_ok = bool(reference) and project_exists(session, reference or "")
    context = build_context(
        ContextRequest(
            tool=tool, signature=signature, lesson_projects=[project], search_projects=searchable,
            reference_project=reference if reference_ok else None,
        ),
        settings,
    )
    ctx = context.to_dict()
    result = {
        "signature": signature.to_dict(),
        "evidence": evidence,
        "lessons": list(ctx["results"]) if ctx["tier"] == 1 else [],
        "context": ctx,
    }
    with session_scope() as session:
        row = session.get(Job, job_id, with_for_update=True)
        if row is None or row.status != "running" or row.step != DIAGNOSIS_STEP:
            raise JobCancelled(job_id)
        store.succeed(session, row, result=result)
