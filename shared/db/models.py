"""SQLAlchemy 2 models: the relational truth of the service.

Vectors live on ``chunks.embedding`` as an un-dimensioned pgvector column together with the ``model_id``
that produced them. HNSW indexes are expression indexes per (model, dimension), created by
:func:`shared.db.vectors.ensure_vector_index`, so switching the embedding model re-embeds into the same
table without ever mixing vectors of two models in one index or one query.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class Base(DeclarativeBase):
    """Declarative base of every table the service owns."""


def _now_col() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class Project(Base):
    """A project: a top-level folder of the vault, and the unit of access control."""

    __tablename__ = "projects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True, nullable=False)
    indexed_commit: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = _now_col()
    updated_at: Mapped[datetime] = _now_col()

    documents: Mapped[list[Document]] = relationship(back_populates="project", cascade="all, delete-orphan")


class Document(Base):
    """One markdown file of a project, as last ingested."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("project_id", "path", name="uq_documents_project_path"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)  # inside the project folder, POSIX
    content_sha: Mapped[str] = mapped_column(String(64), nullable=False)
    # The chunking recipe (shared.vault.markdown.chunker_recipe) the chunks were cut with.
    chunker: Mapped[str] = mapped_column(String(64), nullable=False, default="", server_default="")
    title: Mapped[str] = mapped_column(Text, nullable=False, default="")
    front_matter: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, default=list)
    size: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    git_sha: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = _now_col()
    indexed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    project: Mapped[Project] = relationship(back_populates="documents")
    chunks: Mapped[list[ChunkRow]] = relationship(back_populates="document", cascade="all, delete-orphan")


class ChunkRow(Base):
    """A retrievable chunk; ``embedding`` is NULL until the embed step has run."""

    __tablename__ = "chunks"
    __table_args__ = (
        Index("ix_chunks_document_ordinal", "document_id", "ordinal"),
        Index("ix_chunks_project_model", "project_id", "model_id"),
        Index("ix_chunks_text_sha_model", "text_sha", "model_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), nullable=False)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)  # the document path, denormalised for filters
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    level: Mapped[int] = mapped_column(Integer, nullable=False)
    breadcrumb: Mapped[str] = mapped_column(Text, nullable=False)
    section_title: Mapped[str] = mapped_column(Text, nullable=False)
    anchor: Mapped[str] = mapped_column(Text, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    token_count: Mapped[int] = mapped_column(Integer, nullable=False)
    start_line: Mapped[int] = mapped_column(Integer, nullable=False)
    end_line: Mapped[int] = mapped_column(Integer, nullable=False)
    text_sha: Mapped[str] = mapped_column(String(64), nullable=False)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, default=list)
    updated_at: Mapped[datetime] = _now_col()
    embedding: Mapped[Any] = mapped_column(Vector(), nullable=True)
    model_id: Mapped[str | None] = mapped_column(String(200))

    document: Mapped[Document] = relationship(back_populates="chunks")


class Job(Base):
    """A unit of background work. This table, not the broker, is the source of truth.

    The broker only carries job ids; a task that finds its job finished does nothing, and the beat sweep
    re-enqueues jobs whose lease ran out (worker killed, message lost).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_status_lease", "status", "lease_expires_at"),
        UniqueConstraint("submitted_by", "idempotency_key", name="uq_jobs_idempotency"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    kind: Mapped[str] = mapped_column(String(40), nullable=False)
    project: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="queued")
    step: Mapped[str] = mapped_column(String(40), nullable=False)  # the task to (re)run next
    progress_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    progress_step: Mapped[str] = mapped_column(Text, nullable=False, default="")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=3)
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    submitted_by: Mapped[str] = mapped_column(String(200), nullable=False, default="anonymous")
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    result: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = _now_col()
    updated_at: Mapped[datetime] = _now_col()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Skill(Base):
    """A skill document (``<project>/skills/*.md``), indexed from its front matter."""

    __tablename__ = "skills"
    __table_args__ = (UniqueConstraint("project_id", "path", name="uq_skills_project_path"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), nullable=False)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    title: Mapped[str] = mapped_column(Text, nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, default=list)
    front_matter: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    updated_at: Mapped[datetime] = _now_col()


class ApiKey(Base):
    """An API key for an agent or CI: only a hash of its secret is stored."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    secret_hash: Mapped[str] = mapped_column(String(128), nullable=False)
    capabilities: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    projects: Mapped[list[str] | None] = mapped_column(ARRAY(Text))  # NULL = every project
    created_by: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = _now_col()
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RoleProject(Base):
    """Which projects an OIDC role (group) may see, beside a token's own ``projects`` claim."""

    __tablename__ = "role_projects"

    role: Mapped[str] = mapped_column(Text, primary_key=True)
    project: Mapped[str] = mapped_column(Text, primary_key=True)


class IdempotencyRecord(Base):
    """The first response to a POST carrying an ``Idempotency-Key``, replayed for 24 hours."""

    __tablename__ = "idempotency_keys"

    principal: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    request_sha: Mapped[str] = mapped_column(String(64), nullable=False)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False)
    body: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    headers: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = _now_col()


class VaultEvent(Base):
    """Something happened to the vault (documents published by a sync, a webhook delivery seen)."""

    __tablename__ = "vault_events"
    __table_args__ = (UniqueConstraint("delivery_id", name="uq_vault_events_delivery"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(String(40), nullable=False)
    project: Mapped[str | None] = mapped_column(String(100))
    delivery_id: Mapped[str | None] = mapped_column(String(200))
    commit: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    handled: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = _now_col()


class Lesson(Base):
    """A fix that worked (or did not) for a failure, found again by its signature or its symptom."""

    __tablename__ = "lessons"
    __table_args__ = (
        Index("ix_lessons_sig", "sig_sha"),
        Index("ix_lessons_sym", "sym_sha"),
        Index("ix_lessons_project", "project"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    project: Mapped[str] = mapped_column(String(100), nullable=False)
    sig_sha: Mapped[str | None] = mapped_column(String(64))
    sym_sha: Mapped[str | None] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(40), nullable=False)
    normalised: Mapped[str] = mapped_column(Text, nullable=False, default="")
    title: Mapped[str] = mapped_column(Text, nullable=False)
    solution: Mapped[str] = mapped_column(Text, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_by: Mapped[str] = mapped_column(Text, nullable=False, default="")
    success_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    failure_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = _now_col()
    updated_at: Mapped[datetime] = _now_col()
