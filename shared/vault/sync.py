"""Keep the vault working copy, and both indexes, in step with the vault's git remote.

Flow: a verified webhook (or the periodic check) asks for a sync with :func:`request_sync`; a burst of requests
collapses into the one sync job still waiting in the queue. The ``sync`` step (:func:`run_sync_step`) then

1. takes the vault lock (a PostgreSQL advisory lock held for the whole step, so two syncs, or a sync and a
   ``vault generate``, never move the working copy under each other's feet);
2. fetches and fast-forwards the working copy (``GitRepo.sync_to_remote``); a rewritten history (force-push,
   rewind) is reset hard and flagged ``forced``;
3. plans each project (top-level folder) from the commit its index last reached, ``projects.indexed_commit``:
   the files changed between that commit and the new one (renames become a delete plus an add), or, after a
   force-push or when the project was never synced, a full reconcile of the folder;
4. runs the ``ingest`` step of one ingest job per project right there, under the lock, so the documents read
   from the working copy are exactly those of the new commit; that job's ``embed`` and ``index`` steps then
   run on their queues as for any ingest;
5. when a project's index step finishes, :func:`record_published` moves ``indexed_commit`` forward (only
   from the commit the job started from, so a slower, older job can never move it back) and records a
   ``published`` vault event with the changed and removed paths.

Because the next sync always diffs from ``indexed_commit``, not from the working copy's previous commit, a
sync that failed halfway (remote down, embedder down, worker killed) is repaired by the next one: an index
is never left believing it reached a commit it did not.

An unreachable remote raises :class:`VaultRemoteUnreachable` (a ``ConnectionError``), which the shared job
runner treats as transient: the job is retried with backoff and its ``error`` says why.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from shared.config import Settings, get_settings
from shared.db.engine import get_engine, session_scope
from shared.db.models import Job, Project, VaultEvent
from shared.forge.webhook import WebhookDecision
from shared.ingest.pipeline import INGEST_KIND, JobCancelled, run_ingest_step, run_inline
from shared.ingest.sources import MARKDOWN_SUFFIXES, BadDocument, Skipped, SourceError, check_document_path
from shared.jobs import store
from shared.jobs.broker import dispatch
from shared.jobs.runner import run_step
from shared.vault.git import GitError, GitRepo, SyncOutcome
from shared.vault.paths import UnsafePath, validate_project_name

log = logging.getLogger(__name__)

SYNC_KIND = "sync"
SYNC_STEP = "sync"
SYNC_SUBMITTER_PREFIX = "sync:"
# Bounds on what one job row or event row carries, whatever the size of the push.
MAX_REPORTED_SKIPS = 200
MAX_EVENT_PATHS = 1000
MAX_DELIVERY_ID = 200

Dispatcher = Callable[[str, str], None]
PlanMode = Literal["changes", "reconcile", "unchanged"]


class VaultRemoteUnreachable(ConnectionError):
    """The vault remote could not be cloned or fetched (network, auth, missing branch): retried later."""


class VaultBusy(TimeoutError):
    """Another job held the vault lock for too long: retried later."""


# --------------------------------------------------------------------------------------------------
# Locks


def lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _vault_lock_key(settings: Settings) -> int:
    return lock_key(f"vault:{settings.resolved_vault_dir}")


@contextmanager
def vault_lock(settings: Settings, *, wait_secs: float | None = None) -> Iterator[None]:
    """Hold the vault working copy's lock (a session advisory lock on its own connection).

    Waits at most ``wait_secs`` (default: half a job lease, so a waiting job does not lose its lease) and
    raises :class:`VaultBusy` after that. The lock goes away with the connection if the process dies.
    """
    limit = settings.job_lease_secs / 2 if wait_secs is None else wait_secs
    key = _vault_lock_key(settings)
    deadline = time.monotonic() + limit
    with get_engine().connect() as conn:
        # Polling pg_try_advisory_lock rather than a blocking pg_advisory_lock: the deadline stays ours
        # without changing the connection's lock_timeout, which would outlive us in the pool.
        while not conn.execute(text("select pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.commit()
            if time.monotonic() >= deadline:
                raise VaultBusy(f"the vault is locked by another sync or generate job (waited {limit:g}s)")
            time.sleep(0.2)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("select pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()


@contextmanager
def try_vault_lock(settings: Settings) -> Iterator[bool]:
    """Take the vault lock if it is free; yields False (and holds nothing) when it is not."""
    key = _vault_lock_key(settings)
    with get_engine().connect() as conn:
        got = bool(conn.execute(text("select pg_try_advisory_lock(:k)"), {"k": key}).scalar())
        conn.commit()
        try:
            yield got
        finally:
            if got:
                conn.execute(text("select pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()


# --------------------------------------------------------------------------------------------------
# The working copy


def vault_repo(settings: Settings) -> GitRepo:
    """The vault working copy; the Forgejo token is sent to the remote when the remote is on that forge."""
    remote, forge = settings.vault_remote or "", settings.forgejo_url or ""
    same_host = (
        bool(forge)
        and remote.startswith(("http://", "https://"))
        and urlsplit(remote).netloc.rpartition("@")[2] == urlsplit(forge).netloc
    )
    auth = f"Authorization: token {settings.forgejo_token}" if settings.forgejo_token and same_host else None
    return GitRepo(settings.resolved_vault_dir, auth_header=auth)


def update_working_copy(repo: GitRepo, settings: Settings) -> SyncOutcome:
    """Clone the vault remote, or fetch it and fast-forward (or reset after a force-push).

    Raises :class:`VaultRemoteUnreachable` when the remote cannot be read, :class:`SourceError` when the
    vault folder cannot be used (not a git working copy, remote not configured).
    """
    remote = settings.vault_remote
    if not remote:
        raise SourceError("no vault remote is configured (set MEM_VAULT_REMOTE)")
    root = settings.resolved_vault_dir
    if not repo.is_repo():
        if root.exists() and any(root.iterdir()):
            raise SourceError(
                f"the vault folder '{root.name}' holds files but is not a git working copy; move it away "
                "(or point MEM_VAULT_DIR elsewhere) so the remote can be cloned"
            )
        try:
            repo.clone(remote, settings.vault_branch)
        except GitError as exc:
            raise VaultRemoteUnreachable(f"cannot clone the vault remote: {exc}") from None
        head = repo.head_sha()
        if head is None:
            raise VaultRemoteUnreachable(f"the vault remote has no commit on {settings.vault_branch!r}")
        return SyncOutcome(None, head, forced=False)
    try:
        repo.set_remote(remote)
    except GitError as exc:
        raise SourceError(f"cannot configure the vault remote: {exc}") from None
    try:
        return repo.sync_to_remote(settings.vault_branch)
    except GitError as exc:
        raise VaultRemoteUnreachable(f"cannot update the vault from its remote: {exc}") from None


# --------------------------------------------------------------------------------------------------
# Planning: which projects need what


@dataclass
class ProjectPlan:
    """What one project needs to reach the new commit."""

    project: str
    mode: PlanMode
    base_commit: str | None  # the project's indexed_commit when planned
    changed: list[str] = field(default_factory=list)  # paths inside the project folder
    deleted: list[str] = field(default_factory=list)


def _project_folders(repo: GitRepo, skipped: list[Skipped]) -> set[str]:
    """Top-level folders holding tracked files, with unusable names reported once."""
    tops: set[str] = set()
    for path in repo.ls_files():
        top, sep, _ = path.partition("/")
        if sep and not top.startswith("."):
            tops.add(top)
    usable: set[str] = set()
    for top in sorted(tops):
        try:
            usable.add(validate_project_name(top))
        except UnsafePath as exc:
            skipped.append(Skipped(f"{top}/", f"folder is not a usable project name: {exc}"))
    return usable


def _bucket_changes(repo: GitRepo, base: str, new: str, skipped: list[Skipped]) -> dict[str, ProjectPlan] | None:
    """The changes between two commits grouped by project, or None when ``base`` is unknown to git."""
    try:
        changes = repo.changes(base, new)
    except GitError:
        return None
    plans: dict[str, ProjectPlan] = {}
    for change in changes:
        if change.kind == "renamed" and change.old_path is not None:
            moves = [(change.old_path, "deleted"), (change.path, "changed")]
        elif change.kind == "deleted":
            moves = [(change.path, "deleted")]
        else:
            moves = [(change.path, "changed")]
        for path, what in moves:
            top, sep, rest = path.partition("/")
            if not sep:
                if what == "changed" and path.lower().endswith(MARKDOWN_SUFFIXES):
                    skipped.append(Skipped(path, "not inside a project folder"))
                continue
            if top.startswith("."):
                continue
            try:
                validate_project_name(top)
            except UnsafePath:
                continue  # reported once by _project_folders
            if not rest.lower().endswith(MARKDOWN_SUFFIXES):
                if what == "changed":
                    skipped.append(Skipped(path, "not a markdown file (.md, .markdown): not indexed"))
                continue
            try:
                rest = check_document_path(rest)
            except BadDocument as exc:
                if what == "changed":
                    skipped.append(Skipped(path, str(exc)))
                continue
            plan = plans.setdefault(top, ProjectPlan(top, "changes", base))
            (plan.changed if what == "changed" else plan.deleted).append(rest)
    for plan in plans.values():
        # A path deleted and re-created in one diff (rename onto an old name) exists at the new commit.
        plan.deleted = sorted(set(plan.deleted) - set(plan.changed))
        plan.changed = sorted(set(plan.changed))
    return plans


def plan_projects(
    repo: GitRepo, outcome: SyncOutcome, indexed: Mapping[str, str | None]
) -> tuple[list[ProjectPlan], list[Skipped]]:
    """Plan every project of the vault (and every project a sync indexed before) for ``outcome.new_sha``.

    ``indexed`` maps project names to their ``indexed_commit``. A project is reconciled in full after a
    force-push, when it never reached a commit through a sync, or when its commit is unknown to git; it
    gets its changed paths otherwise, or only a commit bump when nothing of it changed.
    """
    new = outcome.new_sha
    skipped: list[Skipped] = []
    candidates = _project_folders(repo, skipped) | {p for p, commit in indexed.items() if commit is not None}
    diffs: dict[str, dict[str, ProjectPlan] | None] = {}
    plans: list[ProjectPlan] = []
    for project in sorted(candidates):
        base = indexed.get(project)
        if base == new:
            continue
        if outcome.forced or base is None:
            plans.append(ProjectPlan(project, "reconcile", base))
            continue
        if base not in diffs:
            diffs[base] = _bucket_changes(repo, base, new, skipped)
        buckets = diffs[base]
        if buckets is None:
            plans.append(ProjectPlan(project, "reconcile", base))
        elif project in buckets:
            plans.append(buckets[project])
        else:
            plans.append(ProjectPlan(project, "unchanged", base))
    return plans, skipped


# --------------------------------------------------------------------------------------------------
# Recording what was indexed


def advance_indexed_commit(session: Session, project: str, base: str | None, new: str) -> bool:
    """Compare-and-set ``projects.indexed_commit`` from ``base`` to ``new``; True when it moved."""
    result = session.execute(
        update(Project)
        .where(Project.name == project, Project.indexed_commit.is_not_distinct_from(base))
        .values(indexed_commit=new, updated_at=func.now())
    )
    return bool(result.rowcount)


def record_published(session: Session, job: Job, project: str, changed: list[str], removed: list[str]) -> None:
    """Called by the ingest pipeline when the index step of a vault ingest job finishes (same transaction).

    Moves the project's ``indexed_commit`` to the job's commit when the job says so, and records a
    ``published`` event naming the documents that changed or went away.
    """
    source = job.payload.get("source") or {}
    commit = source.get("commit")
    if commit and source.get("advance_commit", True):
        advance_indexed_commit(session, project, source.get("base_commit"), commit)
    if changed or removed:
        session.add(
            VaultEvent(
                kind="published",
                project=project,
                commit=commit,
                detail={
                    "changed": changed[:MAX_EVENT_PATHS],
                    "removed": removed[:MAX_EVENT_PATHS],
                    "truncated": len(changed) > MAX_EVENT_PATHS or len(removed) > MAX_EVENT_PATHS,
                    "job_id": job.id,
                    "sync_job": job.payload.get("sync_job"),
                },
            )
        )


# --------------------------------------------------------------------------------------------------
# Requesting a sync (webhook, periodic check, CLI)


def request_sync(session: Session, *, submitted_by: str, reason: str, after_sha: str | None = None) -> tuple[store.JobView, bool]:
    """The sync job that will pick up the remote's current state: a queued one if any, else a new one.

    Returns ``(job, created)``; the caller dispatches the ``sync`` step when ``created``. Creation is
    serialised by a transaction advisory lock, so two webhooks arriving together make one job.
    """
    session.execute(text("select pg_advisory_xact_lock(:k)"), {"k": lock_key("sync-enqueue")})
    waiting = session.scalars(
        select(Job)
        .where(Job.kind == SYNC_KIND, Job.status == "queued", Job.step == SYNC_STEP)
        .order_by(Job.created_at)
        .limit(1)
    ).first()
    if waiting is not None:
        return store.JobView.of(waiting), False
    job, _ = store.create_job(
        session,
        kind=SYNC_KIND,
        first_step=SYNC_STEP,
        project=None,
        payload={"reason": reason, "after_sha": after_sha},
        submitted_by=submitted_by,
    )
    return store.JobView.of(job), True


@dataclass(frozen=True)
class DeliveryOutcome:
    """What happened to one verified webhook delivery."""

    status: Literal["queued", "ignored", "duplicate"]
    reason: str
    job_id: str | None = None
    created: bool = False  # a new sync job was made (dispatch it); False = joined a queued one

    def to_dict(self, delivery_id: str | None) -> dict[str, Any]:
        """The webhook endpoint's answer."""
        return {"status": self.status, "reason": self.reason, "job_id": self.job_id, "delivery_id": delivery_id}


def receive_delivery(
    session: Session,
    decision: WebhookDecision,
    *,
    settings: Settings,
    repository: str | None = None,
) -> DeliveryOutcome:
    """Deduplicate a verified delivery by its id, record it, and ask for a sync when it changed the vault.

    ``repository`` is the payload's ``repository.full_name``; when ``MEM_FORGEJO_REPO`` is set, deliveries
    about another repository are ignored.
    """
    should_sync, reason = decision.should_sync, decision.reason
    if should_sync and settings.forgejo_repo and repository and repository.lower() != settings.forgejo_repo.lower():
        should_sync, reason = False, f"event is about {repository}, not the vault repository"
    if should_sync and not settings.vault_remote:
        should_sync, reason = False, "no vault remote is configured (MEM_VAULT_REMOTE): nothing to sync"
    delivery = decision.delivery_id[:MAX_DELIVERY_ID] if decision.delivery_id else None
    detail: dict[str, Any] = {"event": decision.event, "reason": reason, "sync": should_sync}
    inserted = session.execute(
        pg_insert(VaultEvent)
        .values(kind="webhook", delivery_id=delivery, commit=decision.after_sha, detail=detail, handled=not should_sync)
        .on_conflict_do_nothing(constraint="uq_vault_events_delivery")
        .returning(VaultEvent.id)
    ).scalar()
    if inserted is None:
        return DeliveryOutcome("duplicate", f"delivery {delivery} was already received")
    if not should_sync:
        return DeliveryOutcome("ignored", reason)
    job, created = request_sync(session, submitted_by="webhook", reason=reason, after_sha=decision.after_sha)
    session.execute(
        update(VaultEvent).where(VaultEvent.id == inserted).values(detail={**detail, "job_id": job.id}, handled=True)
    )
    return DeliveryOutcome("queued", reason if created else f"{reason}; joined the queued sync", job.id, created)


def periodic_check(settings: Settings, send: Dispatcher = dispatch) -> dict[str, Any]:
    """The beat's fallback for lost webhooks: ask for a sync when the remote moved or a project lags.

    Cheap when nothing changed (one ``git fetch``), and it creates no job then. A busy vault (a sync is
    running) or an unreachable remote is reported and left for the next tick.
    """
    if not settings.vault_remote:
        return {"status": "disabled", "reason": "MEM_VAULT_REMOTE is not set"}
    repo = vault_repo(settings)
    with try_vault_lock(settings) as got:
        if not got:
            return {"status": "busy", "reason": "a sync or generate job holds the vault"}
        reason = ""
        if not repo.is_repo():
            reason = "the vault has not been cloned yet"
        else:
            try:
                remote = repo.fetch(settings.vault_branch)
            except GitError as exc:
                log.warning("periodic vault check: remote unreachable", extra={"error": str(exc)})
                return {"status": "unreachable", "reason": str(exc)}
            head = repo.head_sha()
            if remote != head:
                reason = f"the remote moved to {remote[:12]}"
            else:
                reason = _lagging_projects_reason(repo, head)
    if not reason:
        return {"status": "up-to-date"}
    with session_scope() as session:
        job, created = request_sync(session, submitted_by="periodic", reason=reason)
    if created:
        send(SYNC_STEP, job.id)
    return {"status": "queued", "reason": reason, "job_id": job.id, "created": created}


def _lagging_projects_reason(repo: GitRepo, head: str | None) -> str:
    """A reason to sync when a vault project's index is behind the working copy and no job is catching up."""
    folders = _project_folders(repo, [])
    with session_scope() as session:
        indexed = dict(session.execute(select(Project.name, Project.indexed_commit)).all())
        busy = set(
            session.scalars(
                select(Job.project).where(
                    Job.kind == INGEST_KIND,
                    Job.status.in_(store.ACTIVE),
                    Job.submitted_by.startswith(SYNC_SUBMITTER_PREFIX),
                )
            )
        )
    lagging = sorted(p for p in folders if indexed.get(p) != head and p not in busy)
    return f"projects behind the working copy: {', '.join(lagging[:5])}" if lagging else ""


# --------------------------------------------------------------------------------------------------
# The sync step


def _ingest_project(settings: Settings, plan: ProjectPlan, new_sha: str, sync_job: str, send: Dispatcher) -> dict[str, Any]:
    """Create the project's ingest job and run its ingest step now (under the vault lock)."""
    source: dict[str, Any] = {
        "type": "vault",
        "path": str(settings.resolved_vault_dir / plan.project),
        "mode": plan.mode,
        "changed": plan.changed,
        "delete": plan.deleted,
        "commit": new_sha,
        "base_commit": plan.base_commit,
    }
    with session_scope() as session:
        child, _ = store.create_job(
            session,
            kind=INGEST_KIND,
            first_step="ingest",
            project=plan.project,
            payload={"source": source, "git_sha": new_sha, "sync_job": sync_job},
            submitted_by=f"{SYNC_SUBMITTER_PREFIX}{sync_job}",
        )
        child_id = child.id
    run_step("ingest", child_id, lambda job_id: run_ingest_step(job_id, send))
    with session_scope() as session:
        view = store.get_job(session, child_id)
    assert view is not None
    return {
        "project": plan.project,
        "mode": plan.mode,
        "job_id": child_id,
        "status": view.status,
        "error": view.error,
        "changed": len(plan.changed) if plan.mode == "changes" else None,
        "deleted": len(plan.deleted) if plan.mode == "changes" else None,
        "skipped": [
            {"path": f"{plan.project}/{s['path']}", "reason": s["reason"]} for s in view.result.get("skipped", [])
        ],
    }


def run_sync_step(job_id: str, send: Dispatcher = dispatch) -> None:
    """The ``sync`` step: update the working copy and start the ingest of what changed (module docstring)."""
    with session_scope() as session:
        if store.claim(session, job_id, SYNC_STEP) is None:
            return
    settings = get_settings()
    if not settings.vault_remote:
        raise SourceError("no vault remote is configured (set MEM_VAULT_REMOTE)")
    repo = vault_repo(settings)
    with vault_lock(settings):
        with session_scope() as session:
            store.report_progress(session, job_id, done=0, total=0, step="fetching the vault remote")
        outcome = update_working_copy(repo, settings)
        with session_scope() as session:
            indexed: dict[str, str | None] = dict(session.execute(select(Project.name, Project.indexed_commit)).all())
        plans, skipped = plan_projects(repo, outcome, indexed)
        projects: list[dict[str, Any]] = []
        for done, plan in enumerate(plans, start=1):
            with session_scope() as session:
                if store.is_cancelled(session, job_id):
                    raise JobCancelled(job_id)
                if plan.mode == "unchanged":
                    advance_indexed_commit(session, plan.project, plan.base_commit, outcome.new_sha)
            if plan.mode == "unchanged":
                projects.append({"project": plan.project, "mode": "unchanged"})
            else:
                report = _ingest_project(settings, plan, outcome.new_sha, job_id, send)
                skipped += [Skipped(s["path"], s["reason"]) for s in report.pop("skipped")]
                projects.append(report)
            with session_scope() as session:
                store.report_progress(session, job_id, done=done, total=len(plans), step=f"synced {plan.project}")
    with session_scope() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status != "running" or job.step != SYNC_STEP:
            raise JobCancelled(job_id)
        store.succeed(
            session,
            job,
            result={
                "old_commit": outcome.old_sha,
                "new_commit": outcome.new_sha,
                "forced": outcome.forced,
                "projects": projects,
                "skipped": [s.to_dict() for s in skipped[:MAX_REPORTED_SKIPS]],
                "skipped_total": len(skipped),
            },
        )
    log.info(
        "vault synced",
        extra={"job_id": job_id, "commit": outcome.new_sha, "forced": outcome.forced, "projects": len(projects)},
    )


def sync_inline(submitted_by: str = "cli") -> str:
    """Run a whole sync in this process, including the projects' embed and index steps (CLI, tests)."""
    with session_scope() as session:
        job, _ = request_sync(session, submitted_by=submitted_by, reason="requested inline")
    due: list[tuple[str, str]] = []

    def collect(step: str, target: str) -> None:
        due.append((step, target))

    run_step(SYNC_STEP, job.id, lambda job_id: run_sync_step(job_id, collect))
    for _step, child in due:
        run_inline(child)
    return job.id
