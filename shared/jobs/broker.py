"""The Celery application's configuration and how the core hands a job step to the broker.

Both the API (which only sends) and the workers (which also consume) build their Celery app here, so
queues, routes and transport settings exist in one place. The broker is Redis when ``MEM_REDIS_URL`` is
set; otherwise kombu's SQLAlchemy transport on the (embedded) PostgreSQL, so a single machine needs no
server the user installs and still runs real workers in real processes.
"""

from __future__ import annotations

import threading

from celery import Celery
from kombu import Queue

from shared.config import QUEUES, Settings, get_settings

_lock = threading.Lock()
_app: Celery | None = None

# Task name of each step; a step's queue has the same name as the step.
STEP_TASKS: dict[str, str] = {queue: f"{queue}.run" for queue in QUEUES}
SWEEP_TASK = "sync.sweep"
PERIODIC_SYNC_TASK = "sync.periodic"


def broker_url(settings: Settings) -> str:
    """Redis when configured, else the database through kombu's SQLAlchemy transport."""
    if settings.redis_url:
        return settings.redis_url
    from shared.db.engine import database_url

    return "sqla+" + database_url(settings, start_embedded=settings.embedded_database)


def make_celery(settings: Settings | None = None) -> Celery:
    """Build a configured Celery app (tasks are registered by the ``workers`` package)."""
    settings = settings or get_settings()
    url = broker_url(settings)
    if url.startswith("sqla+"):
        # kombu passes every transport option straight to create_engine(), so the polling interval
        # cannot go there; it is read from the transport class instead.
        from kombu.transport.sqlalchemy import Transport

        Transport.polling_interval = settings.broker_poll_secs
    app = Celery("poimen", broker=url, backend=settings.redis_url or None)
    app.conf.update(
        task_queues=[Queue(name) for name in QUEUES],
        task_default_queue="ingest",
        task_routes={f"{queue}.*": {"queue": queue} for queue in QUEUES},
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        # kombu hands SQLAlchemy-transport options to create_engine(); the visibility timeout is Redis's.
        broker_transport_options=(
            {"pool_pre_ping": True}
            if url.startswith("sqla+")
            else {"visibility_timeout": max(3600, settings.job_lease_secs * 4)}
        ),
        beat_schedule={
            "sweep-expired-jobs": {"task": SWEEP_TASK, "schedule": settings.sweep_interval_secs},
            # Fallback for lost webhooks; MEM_SYNC_INTERVAL_SECS=0 turns it off.
            **(
                {"periodic-vault-sync": {"task": PERIODIC_SYNC_TASK, "schedule": settings.sync_interval_secs}}
                if settings.sync_interval_secs > 0
                else {}
            ),
        },
        timezone="UTC",
        enable_utc=True,
    )
    return app


def get_celery() -> Celery:
    """This process's Celery app (for sending)."""
    global _app
    with _lock:
        if _app is None:
            _app = make_celery()
        return _app


def reset_celery() -> None:
    """Forget the app (tests switch brokers)."""
    global _app
    with _lock:
        _app = None


def dispatch(step: str, job_id: str, countdown: float | None = None) -> None:
    """Send ``job_id``'s ``step`` to its queue. Failure to send is safe: the sweep re-enqueues it later."""
    get_celery().send_task(STEP_TASKS[step], args=[job_id], queue=step, countdown=countdown)
