"""Database URL resolution, one engine per process, sessions, and migrations.

Celery's prefork pool forks worker children from a parent that may already hold connections; a pooled
connection must never cross a fork. :func:`get_engine` therefore keys the engine by pid and builds a fresh
one in each child.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from shared.config import Settings, get_settings
from shared.db import embedded

_lock = threading.Lock()
_engine: Engine | None = None
_engine_pid: int | None = None
_sessionmaker: sessionmaker[Session] | None = None

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_ID = 0x6D656D31  # pg advisory lock id: "mem1"


def database_url(settings: Settings | None = None, *, start_embedded: bool = False) -> str:
    """The SQLAlchemy URL of the database: ``MEM_DATABASE_URL`` or the embedded server's socket.

    With ``start_embedded`` the embedded server is started when it is not running; otherwise a missing
    embedded server is an error (workers and the API attach to the one ``mem up`` started).
    """
    settings = settings or get_settings()
    if settings.database_url:
        url = settings.database_url
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        return url
    data_dir = settings.resolved_data_dir
    server = embedded.start(data_dir) if start_embedded else embedded.find_running(data_dir)
    if server is None:
        raise embedded.EmbeddedPostgresError(
            f"no embedded PostgreSQL is running in {data_dir}; start the stack with `mem up`"
        )
    return server.url


def get_engine(settings: Settings | None = None) -> Engine:
    """This process's engine (created on first use, and again after a fork)."""
    global _engine, _engine_pid, _sessionmaker
    pid = os.getpid()
    if _engine is not None and _engine_pid == pid:
        return _engine
    with _lock:
        if _engine is not None and _engine_pid == pid:
            return _engine
        if _engine is not None:
            # Inherited from the parent through fork: drop the pool without closing the parent's sockets.
            _engine.dispose(close=False)
        settings = settings or get_settings()
        url = database_url(settings, start_embedded=settings.embedded_database)
        _engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
        _engine_pid = pid
        _sessionmaker = sessionmaker(bind=_engine, expire_on_commit=False)
        return _engine


def reset_engine() -> None:
    """Forget this process's engine (tests switch databases; settings changed)."""
    global _engine, _engine_pid, _sessionmaker
    with _lock:
        if _engine is not None and _engine_pid == os.getpid():
            _engine.dispose()
        _engine = None
        _engine_pid = None
        _sessionmaker = None


@contextmanager
def session_scope() -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    get_engine()
    assert _sessionmaker is not None
    session = _sessionmaker()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def upgrade_database(engine: Engine | None = None) -> None:
    """Apply Alembic migrations up to head; concurrent callers serialise on an advisory lock."""
    from alembic import command
    from alembic.config import Config

    engine = engine or get_engine()
    with engine.connect() as conn:
        conn.execute(text("select pg_advisory_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
        try:
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()
        finally:
            conn.execute(text("select pg_advisory_unlock(:id)"), {"id": _MIGRATION_LOCK_ID})
            conn.commit()
