"""The one-machine stack behind ``mem up``: database, migrations, worker processes, beat, sample vault.

Worker pools are real processes (``mem worker``), one pool per kind of work: the embedding pool is CPU and
memory heavy and gets a single process; the I/O pool takes every other queue. Their pids are written to
``<data_dir>/run/`` so a later ``mem up`` can stop workers orphaned by a ``kill -9`` of an earlier one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from shared.config import QUEUES, Settings

SAMPLE_VAULT = Path(__file__).parent / "vault" / "sample"


@dataclass
class WorkerPool:
    """One ``mem worker`` (or ``mem beat``) process."""

    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None


@dataclass
class Stack:
    """The processes ``mem up`` runs beside the API."""

    settings: Settings
    pools: list[WorkerPool] = field(default_factory=list)

    @property
    def run_dir(self) -> Path:
        """Where pid files and logs of the worker processes go."""
        path = self.settings.resolved_data_dir / "run"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def start(self) -> None:
        """Start the worker pools and beat as child processes."""
        stop_orphans(self.run_dir)
        general = ",".join(q for q in QUEUES if q != "embed")
        mem = [sys.executable, "-m", "cli.main"]
        self.pools = [
            WorkerPool("worker-embed", mem + ["worker", "-Q", "embed", "-c", "1", "-n", "embed@%h"]),
            WorkerPool("worker-io", mem + ["worker", "-Q", general, "-c", "2", "-n", "io@%h"]),
            WorkerPool("beat", mem + ["beat"]),
        ]
        env = {**os.environ, "MEM_DATA_DIR": str(self.settings.resolved_data_dir)}
        for pool in self.pools:
            pool.log_path = self.run_dir / f"{pool.name}.log"
            with open(pool.log_path, "ab") as log_file:
                pool.process = subprocess.Popen(
                    pool.argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            (self.run_dir / f"{pool.name}.pid").write_text(str(pool.process.pid))

    def stop(self, timeout: float = 20.0) -> None:
        """Ask every pool to finish its current task (SIGTERM = Celery warm shutdown), then make sure."""
        for pool in self.pools:
            if pool.process and pool.process.poll() is None:
                pool.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for pool in self.pools:
            if pool.process is None:
                continue
            try:
                pool.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(pool.process.pid)
            (self.run_dir / f"{pool.name}.pid").unlink(missing_ok=True)

    def dead_pools(self) -> list[WorkerPool]:
        """Pools whose process exited."""
        return [p for p in self.pools if p.process is not None and p.process.poll() is not None]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stop_orphans(run_dir: Path) -> list[int]:
    """Stop worker processes left by an earlier ``mem up`` that died without cleaning up."""
    stopped: list[int] = []
    for pidfile in run_dir.glob("*.pid"):
        try:
            pid = int(pidfile.read_text().strip())
            proc = psutil.Process(pid)
            if "cli.main" in " ".join(proc.cmdline()):
                proc.terminate()
                try:
                    proc.wait(5)
                except psutil.TimeoutExpired:
                    _kill_group(pid)
                stopped.append(pid)
        except (ValueError, psutil.NoSuchProcess, psutil.AccessDenied):
            pass
        pidfile.unlink(missing_ok=True)
    return stopped


def prepare_sample_vault(vault_dir: Path) -> bool:
    """Copy the project's sample vault into ``vault_dir`` as a git repository, unless a vault exists there."""
    if vault_dir.exists() and any(p for p in vault_dir.iterdir() if not p.name.startswith(".")):
        return False
    vault_dir.mkdir(parents=True, exist_ok=True)
    for item in SAMPLE_VAULT.iterdir():
        if item.is_dir():
            shutil.copytree(item, vault_dir / item.name, dirs_exist_ok=True)
    git = ["git", "-C", str(vault_dir), "-c", "user.name=poimen", "-c", "user.email=poimen@localhost"]
    if not (vault_dir / ".git").exists():
        subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "Sample vault", "--allow-empty"], check=True)
    return True


def vault_projects(vault_dir: Path) -> list[str]:
    """Top-level folders of the vault: one per project."""
    if not vault_dir.is_dir():
        return []
    return sorted(p.name for p in vault_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
