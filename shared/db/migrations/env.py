"""Alembic environment: runs on the connection handed over by ``shared.db.engine.upgrade_database``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from shared.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on the given connection, or on ``sqlalchemy.url`` (``alembic`` CLI use)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
