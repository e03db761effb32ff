"""Read models over the database: projects and skills, always filtered to what a principal may see."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shared.db.models import ChunkRow, Document, Project, Skill
from shared.identity.principal import Principal


def _visible(principal: Principal):  # type: ignore[no-untyped-def]
    """A SQL condition on Project.name limiting rows to the principal's projects."""
    if principal.projects is None:
        return Project.name.is_not(None)
    return Project.name.in_(sorted(principal.projects))


def list_projects(session: Session, principal: Principal) -> list[dict[str, Any]]:
    """Projects the principal may see, with document and chunk counts."""
    docs = select(Document.project_id, func.count().label("n")).group_by(Document.project_id).subquery()
    chunks = (
        select(
            ChunkRow.project_id,
            func.count().label("n"),
            func.count(ChunkRow.embedding).label("embedded"),
        )
        .group_by(ChunkRow.project_id)
        .subquery()
    )
    rows = session.execute(
        select(Project, docs.c.n, chunks.c.n, chunks.c.embedded)
        .outerjoin(docs, docs.c.project_id == Project.id)
        .outerjoin(chunks, chunks.c.project_id == Project.id)
        .where(_visible(principal))
        .order_by(Project.name)
    ).all()
    return [
        {
            "name": p.name,
            "documents": n_docs or 0,
            "chunks": n_chunks or 0,
            "embedded_chunks": n_emb or 0,
            "indexed_commit": p.indexed_commit,
            "updated_at": p.updated_at.isoformat() if p.updated_at else None,
        }
        for p, n_docs, n_chunks, n_emb in rows
        if principal.may_see(p.name)
    ]


def project_exists(session: Session, name: str) -> bool:
    """True when the project has been ingested."""
    return session.scalar(select(Project.id).where(Project.name == name)) is not None


def list_skills(
    session: Session, principal: Principal, *, project: str | None = None, tag: str | None = None
) -> list[dict[str, Any]]:
    """Skills of visible projects; a project the principal may not see yields nothing (no existence leak)."""
    stmt = select(Skill, Project.name).join(Project, Skill.project_id == Project.id).where(_visible(principal))
    if project is not None:
        stmt = stmt.where(Project.name == project)
    if tag is not None:
        stmt = stmt.where(Skill.tags.any(tag))
    rows = session.execute(stmt.order_by(Project.name, Skill.path)).all()
    return [
        {
            "project": name,
            "path": s.path,
            "name": s.name,
            "title": s.title,
            "description": s.description,
            "tags": list(s.tags),
            "updated_at": s.updated_at.isoformat() if s.updated_at else None,
        }
        for s, name in rows
        if principal.may_see(name)
    ]
