"""Shared fixtures: a real embedded PostgreSQL, real worker processes, the Flask app, API keys.

Every test that needs the database shares one embedded server for the session (starting it costs about a
second) and isolates itself by project name. Worker processes are started per module and stopped after it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.oidc_issuer import oidc_issuer  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("MEM_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1, message: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy, or fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {message or condition}: last value {last!r}")


def _reset_process_state() -> None:
    from shared.config import get_settings
    from shared.db.engine import reset_engine
    from shared.jobs.broker import reset_celery

    get_settings.cache_clear()
    reset_engine()
    reset_celery()


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    """A short-pathed data directory (unix socket paths are limited to ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="memt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def base_env(data_dir: Path) -> dict[str, str]:
    """The MEM_* environment every test process and worker shares."""
    env = {
        "MEM_DATA_DIR": str(data_dir),
        "MEM_AUTH": "on",
        "MEM_LOG_LEVEL": "WARNING",
        "MEM_BROKER_POLL_SECS": "0.1",
        "MEM_SWEEP_INTERVAL_SECS": "1",
        "MEM_JOB_LEASE_SECS": "30",
        # Tests poll endpoints in loops; the rate-limit tests switch limits on for themselves.
        "MEM_RATE_LIMIT_ENABLED": "false",
    }
    for key in list(os.environ):
        if key.startswith("MEM_") and key not in env and key != "MEM_TEST_REDIS_URL" and key != "MEM_OPENSEARCH_URL":
            del os.environ[key]
    os.environ.update(env)
    return env


@pytest.fixture(scope="session")
def database(base_env: dict[str, str], data_dir: Path) -> Iterator[str]:
    """The embedded PostgreSQL with migrations applied; yields its URL."""
    from shared.db import embedded
    from shared.db.engine import get_engine, reset_engine, upgrade_database

    _reset_process_state()
    server = embedded.start(data_dir)
    upgrade_database(get_engine())
    yield server.url
    reset_engine()
    embedded.stop(data_dir)


@pytest.fixture
def settings(database: str):  # type: ignore[no-untyped-def]
    """Fresh settings for this test (reads the environment again)."""
    from shared.config import get_settings

    get_settings.cache_clear()
    return get_settings()


@pytest.fixture
def project_name() -> str:
    """A project name no other test uses."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def app(settings):  # type: ignore[no-untyped-def]
    from api.app import create_app

    application = create_app(settings)
    application.testing = True
    return application


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    return app.test_client()


@pytest.fixture
def make_key(database: str) -> Callable[..., str]:
    """Create an API key and return its plaintext: ``make_key(caps=[...], projects=[...] | None)``."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    def make(caps: list[str] | None = None, projects: list[str] | None = None, name: str = "test") -> str:
        with session_scope() as session:
            plaintext, _ = keystore.create_key(
                session, name=name, capabilities=caps or ["memory:admin"], projects=projects
            )
        return plaintext

    return make


@pytest.fixture
def admin_headers(make_key: Callable[..., str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_key()}"}


class WorkerProcess:
    """A real ``mem worker`` process (its own process group, so it can be SIGKILLed with its children)."""

    def __init__(self, env: dict[str, str], queues: str | None = None, concurrency: int = 1, log: Path | None = None):
        argv = [sys.executable, "-m", "cli.main", "worker", "-c", str(concurrency)]
        if queues:
            argv += ["-Q", queues]
        self.log_path = log or Path(tempfile.mktemp(prefix="memworker-", suffix=".log", dir="/tmp"))
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, cwd=REPO, env={**os.environ, **env}, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def kill9(self) -> None:
        """SIGKILL the whole pool (parent and prefork children), as the OOM killer would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            # SIGQUIT to the parent is Celery's cold shutdown: the test is over, nothing is in flight.
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._log.close()

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


@pytest.fixture
def start_worker(database: str) -> Iterator[Callable[..., WorkerProcess]]:
    """Start real worker processes; all are stopped when the test ends."""
    started: list[WorkerProcess] = []

    def start(env: dict[str, str] | None = None, queues: str | None = None, concurrency: int = 1) -> WorkerProcess:
        worker = WorkerProcess(env or {}, queues=queues, concurrency=concurrency)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def redis_broker(base_env: dict[str, str]) -> Iterator[str]:
    """Switch this process to the Redis broker (a dedicated Redis database, flushed first)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    client.flushdb()
    os.environ["MEM_REDIS_URL"] = REDIS_URL
    _reset_process_state()
    yield REDIS_URL
    del os.environ["MEM_REDIS_URL"]
    client.flushdb()
    _reset_process_state()


def job_status(job_id: str) -> dict[str, Any]:
    """The job as the API would show it."""
    from shared.db.engine import session_scope
    from shared.jobs import store

    with session_scope() as session:
        view = store.get_job(session, job_id)
    assert view is not None
    return view.to_dict()


def wait_for_job(job_id: str, timeout: float = 120.0, worker: WorkerProcess | None = None) -> dict[str, Any]:
    """Wait until the job finished; fail with the worker's log when it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_status(job_id)
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    tail = worker.log_tail() if worker else ""
    pytest.fail(f"job {job_id} did not finish in {timeout}s: {job_status(job_id)}\nworker log:\n{tail}")
