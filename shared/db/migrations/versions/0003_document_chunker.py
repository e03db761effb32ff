"""documents.chunker: the chunking recipe a document was cut with

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Empty for rows written before the column existed: they differ from every recipe, so the next
    # ingest re-chunks them (vectors of unchanged chunk texts carry over).
    op.add_column('documents', sa.Column('chunker', sa.String(length=64), nullable=False, server_default=''))


def downgrade() -> None:
    op.drop_column('documents', 'chunker')
