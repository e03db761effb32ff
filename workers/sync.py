"""Queue ``sync``: the lease sweep and vault synchronisation (webhook-triggered and periodic)."""

from __future__ import annotations

import logging
from typing import Any

from shared.config import get_settings
from shared.db.engine import session_scope
from shared.jobs import store
from shared.jobs.broker import dispatch
from shared.jobs.runner import run_step
from shared.vault.sync import SYNC_STEP, periodic_check, run_sync_step
from workers.celery_app import app

log = logging.getLogger(__name__)


@app.task(name="sync.sweep")
def sweep() -> dict[str, int]:
    """Re-enqueue jobs whose lease expired; fail those out of attempts."""
    with session_scope() as session:
        requeue, failed = store.sweep_expired(session)
    for job_id, step in requeue:
        dispatch(step, job_id)
    if requeue or failed:
        log.warning("lease sweep", extra={"requeued": len(requeue), "failed": len(failed)})
    return {"requeued": len(requeue), "failed": len(failed)}


@app.task(name="sync.run")
def run(job_id: str) -> None:
    """Run the sync step of a job: fetch the vault remote and reindex what changed."""
    run_step(SYNC_STEP, job_id, run_sync_step)


@app.task(name="sync.periodic")
def periodic() -> dict[str, Any]:
    """Beat fallback for lost webhooks: queue a sync when the remote moved or a project lags behind."""
    return periodic_check(get_settings())
