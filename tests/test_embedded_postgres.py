"""The embedded PostgreSQL copes with an owner killed by -9 and with stale bookkeeping, and keeps its data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from shared.db import embedded
from tests.conftest import REPO

pytestmark = pytest.mark.slow

STARTER = """
import signal, sys
from pathlib import Path
from shared.db import embedded
server = embedded.start(Path(sys.argv[1]))
print(server.pid, flush=True)
signal.pause()  # the owner idles until the test kills it with -9
"""


def _query(server: embedded.RunningServer, sql: str):  # type: ignore[no-untyped-def]
    with psycopg.connect(host=str(server.socket_dir), port=server.port, user="postgres", dbname="postgres") as conn:
        cursor = conn.execute(sql)
        rows = cursor.fetchall() if cursor.description else []
        conn.commit()
        return rows


def test_server_orphaned_by_kill9_is_reused_then_stopped_cleanly() -> None:
    data = Path(tempfile.mkdtemp(prefix="memk-", dir="/tmp"))
    owner = subprocess.Popen([sys.executable, "-c", STARTER, str(data)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(owner.stdout.readline())  # type: ignore[union-attr]
        first = embedded.find_running(data)
        assert first is not None and first.pid == pid
        _query(first, "create table kept (v text); insert into kept values ('survives')")
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)

        again = embedded.start(data)
        assert again.pid == pid, "the orphaned server is healthy and must be reused, not started twice"
        assert _query(again, "select v from kept") == [("survives",)]
    finally:
        if owner.poll() is None:
            owner.kill()
        assert embedded.stop(data)
    assert embedded.find_running(data) is None


def test_stale_pidfile_naming_a_foreign_process_is_cleared() -> None:
    data = Path(tempfile.mkdtemp(prefix="mems-", dir="/tmp"))
    server = embedded.start(data)
    _query(server, "create table kept (v int); insert into kept values (42)")
    assert embedded.stop(data)
    pgdata = embedded.pgdata_dir(data)
    # A crash leaves postmaster.pid behind; by the next start its pid may belong to anything (here: us).
    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{pgdata}\n0\n5432\n{pgdata}\n\n0 0\nready\n")
    (pgdata / ".handle_pids.json").write_text("[999999]")
    try:
        restarted = embedded.start(data)
        assert restarted.pid != os.getpid()
        assert _query(restarted, "select v from kept") == [(42,)]
    finally:
        embedded.stop(data)
