"""The worker-side Celery app: configuration from ``shared.jobs.broker`` plus the task modules."""

from __future__ import annotations

from celery.signals import after_setup_logger, worker_process_init

from shared.config import get_settings
from shared.jobs.broker import make_celery
from shared.logjson import configure_logging

app = make_celery()
app.conf.imports = (
    "workers.ingest",
    "workers.embed",
    "workers.index",
    "workers.sync",
    "workers.vault",
    "workers.diagnosis",
)


@after_setup_logger.connect
def _json_logs(**_: object) -> None:
    configure_logging(get_settings().log_level)


@worker_process_init.connect
def _fresh_connections(**_: object) -> None:
    # A prefork child must not reuse the parent's pooled connections or model sessions.
    from shared.db.engine import reset_engine

    reset_engine()
