"""The job store: create, claim with a lease, report progress, finish, fail, and sweep expired leases.

A job runs as a chain of steps (``ingest`` -> ``embed`` -> ``index`` for an ingest job); each step is a task on
the queue of the same name, and the broker message carries nothing but the job id. The row says which step
is due (``step``), so a duplicated or stale message is harmless: a task only works on a job whose due step is
its own, and every step is idempotent.

Leases: a job that is queued or running holds ``lease_expires_at``. Workers extend it as they report progress.
When it runs out (worker SIGKILLed, message lost, broker restarted), :func:`sweep_expired` hands the job back
for re-enqueueing, and gives up with a clear error after ``max_attempts``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from shared.config import get_settings
from shared.db.models import Job

ACTIVE = ("queued", "running")
FINISHED = ("succeeded", "failed", "cancelled")


class JobConflict(ValueError):
    """An idempotency key was reused with a different request."""


def utcnow() -> datetime:
    """Timezone-aware now (UTC); one clock for every lease computation."""
    return datetime.now(UTC)


def _lease(seconds: int | None = None) -> datetime:
    return utcnow() + timedelta(seconds=seconds or get_settings().job_lease_secs)


def request_fingerprint(payload: dict[str, Any]) -> str:
    """A stable hash of a request body, to tell an idempotent replay from a conflicting reuse."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class JobView:
    """A read-only snapshot of a job, as the API and the CLI show it."""

    id: str
    kind: str
    project: str | None
    status: str
    step: str
    progress_done: int
    progress_total: int
    progress_step: str
    attempts: int
    error: str | None
    submitted_by: str
    result: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> JobView:
        """Snapshot a row."""
        return cls(
            id=job.id,
            kind=job.kind,
            project=job.project,
            status=job.status,
            step=job.step,
            progress_done=job.progress_done,
            progress_total=job.progress_total,
            progress_step=job.progress_step,
            attempts=job.attempts,
            error=job.error,
            submitted_by=job.submitted_by,
            result=dict(job.result or {}),
            created_at=job.created_at,
            updated_at=job.updated_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a job in API responses and ``mem jobs show --json``."""
        total = self.progress_total
        return {
            "id": self.id,
            "kind": self.kind,
            "project": self.project,
            "status": self.status,
            "step": self.step,
            "progress": {
                "done": self.progress_done,
                "total": total,
                "fraction": round(self.progress_done / total, 4) if total else (1.0 if self.status == "succeeded" else 0.0),
                "current_step": self.progress_step,
            },
            "attempts": self.attempts,
            "error": self.error,
            "submitted_by": self.submitted_by,
            "result": self.result,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }


def create_job(
    session: Session,
    *,
    kind: str,
    first_step: str,
    project: str | None,
    payload: dict[str, Any],
    submitted_by: str = "anonymous",
    idempotency_key: str | None = None,
) -> tuple[Job, bool]:
    """Insert a queued job; returns ``(job, created)``.

    With an idempotency key already used by the same submitter, the original job is returned
    (``created=False``) when the payload matches, and :class:`JobConflict` is raised when it does not.
    """
    settings = get_settings()
    fingerprint = request_fingerprint({"kind": kind, "project": project, "payload": payload})
    def replay() -> Job | None:
        if not idempotency_key:
            return None
        existing = session.scalars(
            select(Job).where(Job.submitted_by == submitted_by, Job.idempotency_key == idempotency_key)
        ).first()
        if existing is not None and existing.payload.get("_fingerprint") != fingerprint:
            raise JobConflict("this Idempotency-Key was already used with a different request body")
        return existing

    if (existing := replay()) is not None:
        return existing, False
    job = Job(
        id=str(uuid.uuid4()),
        kind=kind,
        project=project,
        status="queued",
        step=first_step,
        payload={**payload, "_fingerprint": fingerprint},
        result={},
        submitted_by=submitted_by,
        idempotency_key=idempotency_key,
        max_attempts=settings.job_max_attempts,
        attempts=0,
        lease_expires_at=_lease(),
        progress_step="queued",
    )
    try:
        # A savepoint: when a concurrent request with the same key wins the insert, its job is the answer.
        with session.begin_nested():
            session.add(job)
    except IntegrityError:
        if (existing := replay()) is not None:
            return existing, False
        raise
    return job, True


def claim(session: Session, job_id: str, step: str) -> Job | None:
    """Take the job for ``step`` if that step is due and nobody holds a live lease on it.

    Returns the locked row (the caller commits), or None when the message is stale: the job is finished,
    another step is due, or another worker is running it under a live lease.
    """
    job = session.get(Job, job_id, with_for_update=True)
    if job is None or job.status in FINISHED or job.step != step:
        return None
    now = utcnow()
    if job.status == "running" and job.lease_expires_at and job.lease_expires_at > now:
        return None
    if job.attempts == 0:
        job.attempts = 1
    job.status = "running"
    job.lease_expires_at = _lease()
    job.started_at = job.started_at or now
    job.updated_at = now
    job.progress_step = step
    return job


def report_progress(session: Session, job_id: str, *, done: int, total: int, step: str | None = None) -> None:
    """Record progress and extend the lease (a heartbeat)."""
    values: dict[str, Any] = {
        "progress_done": done,
        "progress_total": total,
        "lease_expires_at": _lease(),
        "updated_at": utcnow(),
    }
    if step is not None:
        values["progress_step"] = step
    session.execute(update(Job).where(Job.id == job_id, Job.status == "running").values(**values))


def advance(session: Session, job: Job, next_step: str, result: dict[str, Any] | None = None) -> None:
    """Mark the current step done and make ``next_step`` due (the caller then dispatches it)."""
    now = utcnow()
    job.step = next_step
    job.status = "queued"
    job.lease_expires_at = _lease()
    job.updated_at = now
    job.progress_step = f"{next_step} queued"
    if result:
        job.result = {**(job.result or {}), **result}


def succeed(session: Session, job: Job, result: dict[str, Any] | None = None) -> None:
    """Finish the job successfully."""
    now = utcnow()
    job.status = "succeeded"
    job.step = "done"
    job.lease_expires_at = None
    job.finished_at = now
    job.updated_at = now
    job.progress_step = "done"
    job.progress_done = max(job.progress_done, job.progress_total)
    job.error = None
    if result:
        job.result = {**(job.result or {}), **result}


def fail(session: Session, job_id: str, error: str) -> None:
    """Finish the job as failed with a readable reason (never a stack trace)."""
    now = utcnow()
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(ACTIVE))
        .values(status="failed", error=error[:2000], lease_expires_at=None, finished_at=now, updated_at=now)
    )


def retry_later(session: Session, job_id: str, error: str, delay_secs: float) -> bool:
    """Count a failed attempt of the due step and make it due again after ``delay_secs``.

    Returns False (and fails the job) when the attempts are used up.
    """
    job = session.get(Job, job_id, with_for_update=True)
    if job is None or job.status in FINISHED:
        return False
    if job.attempts >= job.max_attempts:
        job.status = "failed"
        job.error = f"gave up after {job.attempts} attempts: {error}"[:2000]
        job.lease_expires_at = None
        job.finished_at = utcnow()
        return False
    job.attempts += 1
    job.status = "queued"
    job.error = f"attempt {job.attempts - 1} failed, retrying: {error}"[:2000]
    job.lease_expires_at = utcnow() + timedelta(seconds=delay_secs + get_settings().job_lease_secs)
    job.updated_at = utcnow()
    return True


def cancel(session: Session, job_id: str) -> bool:
    """Cancel a job that has not finished; running steps notice at their next progress report."""
    now = utcnow()
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(ACTIVE))
        .values(status="cancelled", lease_expires_at=None, finished_at=now, updated_at=now)
    )
    return bool(res.rowcount)


def sweep_expired(session: Session) -> tuple[list[tuple[str, str]], list[str]]:
    """Find active jobs whose lease ran out.

    Returns ``(to_requeue, failed)``: ``(job_id, step)`` pairs to dispatch again (their attempt counted and
    lease renewed here), and ids of jobs that used up their attempts and are now failed.
    """
    now = utcnow()
    rows = session.scalars(
        select(Job)
        .where(Job.status.in_(ACTIVE), Job.lease_expires_at < now)
        .with_for_update(skip_locked=True)
        .limit(500)
    ).all()
    requeue: list[tuple[str, str]] = []
    failed: list[str] = []
    for job in rows:
        if job.attempts >= job.max_attempts:
            job.status = "failed"
            job.error = (
                f"gave up after {job.attempts} attempts: the '{job.step}' step stopped reporting "
                "(worker lost or killed) and its lease expired"
            )
            job.lease_expires_at = None
            job.finished_at = now
            failed.append(job.id)
        else:
            job.attempts += 1
            job.status = "queued"
            job.lease_expires_at = _lease()
            job.updated_at = now
            job.progress_step = f"{job.step} re-queued after lease expiry"
            requeue.append((job.id, job.step))
    return requeue, failed


def get_job(session: Session, job_id: str) -> JobView | None:
    """A snapshot of one job, or None."""
    try:
        uuid.UUID(job_id)
    except (ValueError, AttributeError):
        return None
    job = session.get(Job, job_id)
    return JobView.of(job) if job else None


def is_cancelled(session: Session, job_id: str) -> bool:
    """True when someone cancelled the job while a step was running."""
    status = session.scalar(select(Job.status).where(Job.id == job_id))
    return status == "cancelled"
