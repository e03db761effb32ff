"""Run one step of a job with the failure policy every queue shares.

* A transient failure (database, broker, lexical engine or embedder unavailable) counts an attempt and
  re-dispatches the step with exponential backoff, until ``max_attempts``.
* Bad input (a source that cannot be read) fails the job at once with the readable reason.
* Anything else is a bug: the job fails with the exception's class and message (no stack trace in the
  job row; the stack trace goes to the worker's log).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy.exc import OperationalError

from shared.db.engine import session_scope
from shared.db.models import Job
from shared.embedding.base import EmbedderUnavailable
from shared.ingest.pipeline import JobCancelled
from shared.ingest.sources import BadDocument, SourceError
from shared.jobs import store
from shared.jobs.broker import dispatch
from shared.search.lexical import LexicalUnavailable

log = logging.getLogger(__name__)

TRANSIENT: tuple[type[BaseException], ...] = (
    OperationalError,
    LexicalUnavailable,
    EmbedderUnavailable,
    ConnectionError,
    TimeoutError,
)
PERMANENT: tuple[type[BaseException], ...] = (BadDocument, SourceError)


def run_step(step: str, job_id: str, fn: Callable[[str], None]) -> None:
    """Run ``fn(job_id)`` as ``step`` of the job, applying the retry/fail policy."""
    try:
        fn(job_id)
    except JobCancelled:
        log.info("job step stopped: job cancelled or taken over", extra={"job_id": job_id, "step": step})
    except PERMANENT as exc:
        log.warning("job failed on bad input", extra={"job_id": job_id, "step": step, "error": str(exc)})
        with session_scope() as session:
            store.fail(session, job_id, str(exc))
    except TRANSIENT as exc:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        with session_scope() as session:
            job = session.get(Job, job_id)
            attempt = job.attempts if job else 1
            delay = min(300.0, 2.0 ** attempt)
            again = store.retry_later(session, job_id, reason, delay)
        log.warning("job step failed, %s", "retrying" if again else "giving up",
                    extra={"job_id": job_id, "step": step, "error": reason})
        if again:
            dispatch(step, job_id, countdown=delay)
    except Exception as exc:
        log.exception("job step crashed", extra={"job_id": job_id, "step": step})
        with session_scope() as session:
            store.fail(session, job_id, f"internal error in the '{step}' step: {type(exc).__name__}: {exc}")
