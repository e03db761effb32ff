"""The job store against the real database: claims, leases, retries, sweep, idempotency."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from shared.db.engine import session_scope
from shared.db.models import Job
from shared.jobs import store


def _new(project: str, key: str | None = None, payload: dict | None = None, who: str = "alice") -> str:
    with session_scope() as session:
        job, _ = store.create_job(session, kind="ingest", first_step="ingest", project=project,
                                  payload=payload or {"x": 1}, submitted_by=who, idempotency_key=key)
        return job.id


def _expire(job_id: str) -> None:
    with session_scope() as session:
        session.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=store.utcnow() - timedelta(seconds=1)))


def test_claim_is_exclusive_while_the_lease_lives(database, project_name):
    job_id = _new(project_name)
    with session_scope() as session:
        assert store.claim(session, job_id, "ingest") is not None
    with session_scope() as session:
        assert store.claim(session, job_id, "ingest") is None, "a live lease must keep a second worker out"
    with session_scope() as session:
        assert store.claim(session, job_id, "embed") is None, "a message for another step is stale"
    _expire(job_id)
    with session_scope() as session:
        assert store.claim(session, job_id, "ingest") is not None, "an expired lease can be taken over"


def test_advance_then_succeed(database, project_name):
    job_id = _new(project_name)
    with session_scope() as session:
        job = store.claim(session, job_id, "ingest")
        store.advance(session, job, "embed", result={"changed": ["a.md"]})
    with session_scope() as session:
        job = store.claim(session, job_id, "embed")
        assert job is not None and job.result["changed"] == ["a.md"]
        store.report_progress(session, job_id, done=3, total=10, step="embedding")
    with session_scope() as session:
        job = session.get(Job, job_id)
        store.succeed(session, job, result={"chunks_indexed": 10})
    with session_scope() as session:
        view = store.get_job(session, job_id)
    assert view.status == "succeeded"
    assert view.result == {"changed": ["a.md"], "chunks_indexed": 10}
    assert view.to_dict()["progress"]["done"] == 10
    with session_scope() as session:
        assert store.claim(session, job_id, "done") is None, "a finished job is never claimed again"


def test_sweep_requeues_expired_and_gives_up_after_max_attempts(database, project_name):
    job_id = _new(project_name)
    with session_scope() as session:
        store.claim(session, job_id, "ingest")
    seen_failed = False
    for _ in range(5):
        _expire(job_id)
        with session_scope() as session:
            requeue, failed = store.sweep_expired(session)
        if job_id in failed:
            seen_failed = True
            break
        assert (job_id, "ingest") in requeue
    assert seen_failed
    with session_scope() as session:
        view = store.get_job(session, job_id)
    assert view.status == "failed"
    assert "gave up after 3 attempts" in view.error
    assert "lease expired" in view.error


def test_retry_later_counts_attempts(database, project_name):
    job_id = _new(project_name)
    with session_scope() as session:
        store.claim(session, job_id, "ingest")
    with session_scope() as session:
        assert store.retry_later(session, job_id, "LexicalUnavailable: down", 1.0)
    with session_scope() as session:
        assert store.retry_later(session, job_id, "LexicalUnavailable: down", 1.0)
    with session_scope() as session:
        assert not store.retry_later(session, job_id, "LexicalUnavailable: down", 1.0)
    with session_scope() as session:
        view = store.get_job(session, job_id)
    assert view.status == "failed" and "LexicalUnavailable" in view.error


def test_idempotency_key_replays_and_conflicts(database, project_name):
    first = _new(project_name, key="k-1", payload={"a": 1})
    assert _new(project_name, key="k-1", payload={"a": 1}) == first
    assert _new(project_name, key="k-1", payload={"a": 1}, who="bob") != first, "keys are scoped to the submitter"
    with pytest.raises(store.JobConflict):
        _new(project_name, key="k-1", payload={"a": 2})


def test_cancel_stops_claims(database, project_name):
    job_id = _new(project_name)
    with session_scope() as session:
        assert store.cancel(session, job_id)
    with session_scope() as session:
        assert store.claim(session, job_id, "ingest") is None
        assert store.is_cancelled(session, job_id)


def test_get_job_rejects_garbage_ids(database):
    with session_scope() as session:
        assert store.get_job(session, "../../etc/passwd") is None
        assert store.get_job(session, "00000000-0000-0000-0000-000000000000") is None
