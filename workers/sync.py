"""Queue ``sync``: the lease sweep and vault synchronisation."""

from __future__ import annotations

import logging

from shared.db.engine import session_scope
from shared.jobs import store
from shared.jobs.broker import dispatch
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

