"""lessons

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 20:38:43.437232
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('lessons',
    sa.Column('id', sa.BigInteger(), nullable=False),
    sa.Column('project', sa.String(length=100), nullable=False),
    sa.Column('sig_sha', sa.String(length=64), nullable=True),
    sa.Column('sym_sha', sa.String(length=64), nullable=True),
    sa.Column('tool', sa.String(length=40), nullable=False),
    sa.Column('normalised', sa.Text(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('solution', sa.Text(), nullable=False),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('success_count', sa.Integer(), nullable=False),
    sa.Column('failure_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_lessons_project', 'lessons', ['project'], unique=False)
    op.create_index('ix_lessons_sig', 'lessons', ['sig_sha'], unique=False)
    op.create_index('ix_lessons_sym', 'lessons', ['sym_sha'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_lessons_sym', table_name='lessons')
    op.drop_index('ix_lessons_sig', table_name='lessons')
    op.drop_index('ix_lessons_project', table_name='lessons')
    op.drop_table('lessons')
