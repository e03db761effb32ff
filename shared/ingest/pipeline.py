"""The three steps of an ingest job: ``ingest`` (collect + chunk), ``embed`` and ``index``.

Each step claims the job for itself, does its work idempotently, then makes the next step due and hands it
to the broker. What a step needs from the previous one travels in the job row (``result.changed``,
``result.removed``), never in the broker message, so any step can be re-run after a crash:

* ``ingest`` compares content hashes and the chunking recipe: unchanged documents are not even parsed,
  changed ones (or ones cut by another chunker version or budget) get their chunks replaced (same ids for the same positions), removed ones are deleted with their chunks.
* ``embed`` embeds every chunk of the project that has no vector from the current model, reusing vectors of
  identical text (``text_sha``) first, so a re-run, a re-ingest or a rename costs no model call.
* ``index`` deletes the changed and removed documents from the lexical engine, re-adds the changed ones, and
  marks the documents indexed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, or_, select, text
from sqlalchemy.orm import Session

from shared.config import get_settings
from shared.db.engine import get_engine, session_scope
from shared.db.models import ChunkRow, Document, Job, Project, Skill
from shared.ingest.sources import (
    BadDocument,
    Skipped,
    SourceFile,
    clone_repository,
    collect_directory,
    collect_inline,
    collect_vault_files,
    decode_markdown,
)
from shared.jobs import store
from shared.jobs.broker import dispatch
from shared.search.lexical import LexicalDoc
from shared.vault.document import ParsedDocument
from shared.vault.markdown import chunker_recipe, parse_markdown

log = logging.getLogger(__name__)

INGEST_KIND = "ingest"


Dispatcher = Callable[[str, str], None]


class JobCancelled(Exception):
    """The job was cancelled while this step ran."""


def content_sha(data: bytes) -> str:
    """The hash that decides whether a document changed."""
    return hashlib.sha256(data).hexdigest()


def embed_input(breadcrumb: str, text_: str) -> str:
    """What the model sees for a chunk: its breadcrumb for context, then its text."""
    return f"{breadcrumb}\n\n{text_}" if breadcrumb else text_


def _project_lock(session: Session, project: str) -> None:
    """Serialise writers of one project (two ingests, an ingest and a sync) within a transaction."""
    key = int.from_bytes(hashlib.sha256(f"project:{project}".encode()).digest()[:8], "big", signed=True)
    session.execute(text("select pg_advisory_xact_lock(:k)"), {"k": key})


def get_or_create_project(session: Session, name: str) -> Project:
    """The project row, created on first ingest."""
    project = session.scalars(select(Project).where(Project.name == name)).first()
    if project is None:
        project = Project(name=name)
        session.add(project)
        session.flush()
    return project


def _collect(payload: dict[str, Any]) -> tuple[list[SourceFile], list[Skipped], bool]:
    """Files of the job's source and whether the source is the whole project (absent files are removed)."""
    source = payload.get("source", {})
    kind = source.get("type")
    if kind == "inline":
        files, skipped = collect_inline(source.get("documents", []))
        return files, skipped, bool(source.get("replace", False))
    if kind == "directory":
        files, skipped = collect_directory(Path(source["path"]))
        return files, skipped, True
    if kind == "git":
        settings = get_settings()
        dest = settings.resolved_data_dir / "clones" / hashlib.sha256(source["url"].encode()).hexdigest()[:16]
        dest.parent.mkdir(parents=True, exist_ok=True)
        clone_repository(source["url"], source.get("ref") or "main", dest)
        root = dest / source["subdir"] if source.get("subdir") else dest
        files, skipped = collect_directory(root)
        return files, skipped, True
    if kind == "vault":
        # A vault sync: either the named changed files of one project folder, or ("reconcile") the whole
        # folder after a force-push. The sync holds the vault lock while this step reads the working copy.
        max_bytes = get_settings().max_document_bytes
        project_dir = Path(source["path"])
        if source.get("mode") == "reconcile":
            if not project_dir.is_dir():
                return [], [], True  # the folder is gone from the vault: every document goes
            files, skipped = collect_directory(project_dir, max_bytes=max_bytes)
            return files, skipped, True
        files, skipped = collect_vault_files(project_dir, source.get("changed", []), max_bytes)
        return files, skipped, False
    raise BadDocument(f"unknown source type {kind!r}")


def _parse(files: Sequence[SourceFile], project: str, changed_paths: set[str]) -> tuple[list[tuple[SourceFile, ParsedDocument]], list[Skipped]]:
    from shared.embedding import get_token_counter

    settings = get_settings()
    count_tokens: Callable[[str], int] = get_token_counter(settings)
    parsed: list[tuple[SourceFile, ParsedDocument]] = []
    skipped: list[Skipped] = []
    for f in files:
        if f.path not in changed_paths:
            continue
        try:
            text_ = decode_markdown(f.data, settings.max_document_bytes)
            doc = parse_markdown(
                f.path,
                text_,
                doc_key=f"{project}/{f.path}",
                max_tokens=settings.chunk_max_tokens,
                overlap_tokens=settings.chunk_overlap_tokens,
                count_tokens=count_tokens,
            )
        except (BadDocument, ValueError) as exc:
            skipped.append(Skipped(f.path, str(exc)))
            continue
        if not doc.chunks:
            skipped.append(Skipped(f.path, "document has no text to index"))
            continue
        parsed.append((f, doc))
    return parsed, skipped


def _is_skill(path: str) -> bool:
    return path.startswith("skills/") or "/skills/" in path


def _upsert_skill(session: Session, project: Project, doc: ParsedDocument) -> None:
    fm = doc.front_matter
    name = str(fm.get("name") or Path(doc.path).stem)
    skill = session.scalars(select(Skill).where(Skill.project_id == project.id, Skill.path == doc.path)).first()
    if skill is None:
        skill = Skill(project_id=project.id, path=doc.path, name=name, title=doc.title)
        session.add(skill)
    skill.name = name
    skill.title = doc.title
    skill.description = str(fm.get("description") or "")
    skill.tags = list(doc.tags)
    skill.front_matter = _jsonable(fm)
    skill.updated_at = func.now()


def _jsonable(value: Any) -> Any:
    """Front matter may hold dates and other YAML types; store them as JSON-friendly values."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def run_ingest_step(job_id: str, send: Dispatcher = dispatch) -> None:
    """Step 1: collect, compare hashes, chunk what changed, store documents and chunks."""
    with session_scope() as session:
        job = store.claim(session, job_id, "ingest")
        if job is None:
            return
        payload = dict(job.payload)
        project_name = job.project or ""
    files, skipped, replace_all = _collect(payload)
    hashes = {f.path: content_sha(f.data) for f in files}

    settings = get_settings()
    recipe = chunker_recipe(settings.chunk_max_tokens, settings.chunk_overlap_tokens)
    with session_scope() as session:
        project = session.scalars(select(Project).where(Project.name == project_name)).first()
        existing: dict[str, tuple[str, str]] = {}
        if project is not None:
            existing = {
                path: (sha, chunker)
                for path, sha, chunker in session.execute(
                    select(Document.path, Document.content_sha, Document.chunker).where(
                        Document.project_id == project.id
                    )
                )
            }
    # A document is re-chunked when its bytes changed or when it was cut with another recipe
    # (a new chunker version, another MEM_CHUNK_MAX_TOKENS).
    changed_paths = {p for p, sha in hashes.items() if existing.get(p) != (sha, recipe)}
    parsed, bad = _parse(files, project_name, changed_paths)
    skipped += bad

    deletes = {str(p) for p in payload.get("source", {}).get("delete", [])}
    if payload.get("source", {}).get("type") == "vault":
        # The vault is the truth: a file that can no longer be ingested (now binary, too large, not UTF-8)
        # must not stay searchable with the text it had before.
        deletes |= {s.path for s in skipped}
    with session_scope() as session:
        _project_lock(session, project_name)
        project = get_or_create_project(session, project_name)
        documents = {d.path: d for d in session.scalars(select(Document).where(Document.project_id == project.id))}
        changed: list[str] = []
        carried: dict[str, tuple[Any, str | None]] = {}
        reused = 0
        for f, doc in parsed:
            row = documents.get(doc.path)
            if row is None:
                row = Document(project_id=project.id, path=doc.path, content_sha=doc.content_sha)
                session.add(row)
                session.flush()
            else:
                # Vectors of sections whose text did not change carry over to the new chunk rows.
                for sha, vector, model in session.execute(
                    select(ChunkRow.text_sha, ChunkRow.embedding, ChunkRow.model_id).where(
                        ChunkRow.document_id == row.id, ChunkRow.embedding.is_not(None)
                    )
                ):
                    carried[sha] = (vector, model)
                session.execute(delete(ChunkRow).where(ChunkRow.document_id == row.id))
            row.content_sha = hashes[f.path]
            row.chunker = recipe
            row.title = doc.title
            row.front_matter = _jsonable(doc.front_matter)
            row.tags = list(doc.tags)
            row.size = len(f.data)
            row.git_sha = payload.get("git_sha")
            row.updated_at = func.now()
            row.indexed_at = None
            new_rows = [
                ChunkRow(
                    id=c.id,
                    document_id=row.id,
                    project_id=project.id,
                    source=doc.path,
                    ordinal=c.ordinal,
                    level=c.level,
                    breadcrumb=c.breadcrumb,
                    section_title=c.section_title,
                    anchor=c.anchor,
                    text=c.text,
                    token_count=c.token_count,
                    start_line=c.start_line,
                    end_line=c.end_line,
                    text_sha=hashlib.sha256(embed_input(c.breadcrumb, c.text).encode()).hexdigest(),
                    tags=list(doc.tags),
                )
                for c in doc.chunks
            ]
            for chunk_row in new_rows:
                if chunk_row.text_sha in carried:
                    chunk_row.embedding, chunk_row.model_id = carried[chunk_row.text_sha]
                    reused += 1
            session.add_all(new_rows)
            if _is_skill(doc.path):
                _upsert_skill(session, project, doc)
            changed.append(doc.path)
        seen = set(hashes)
        removed = sorted(
            p for p in documents if (replace_all and p not in seen) or p in deletes
        )
        if removed:
            session.execute(delete(Document).where(Document.project_id == project.id, Document.path.in_(removed)))
            session.execute(delete(Skill).where(Skill.project_id == project.id, Skill.path.in_(removed)))
        project.updated_at = func.now()
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status != "running" or job.step != "ingest":
            raise JobCancelled(job_id)
        previous = job.result or {}
        store.advance(
            session,
            job,
            "embed",
            result={
                "documents_seen": len(files),
                "changed": sorted(set(previous.get("changed", [])) | set(changed)),
                "removed": sorted(set(previous.get("removed", [])) | set(removed)),
                "unchanged": len(files) - len(changed_paths),
                "skipped": [s.to_dict() for s in skipped],
                "chunks_written": sum(len(doc.chunks) for _, doc in parsed),
                "embeddings_reused": previous.get("embeddings_reused", 0) + reused,
            },
        )
    send("embed", job_id)


def run_embed_step(job_id: str, send: Dispatcher = dispatch) -> None:
    """Step 2: give every chunk of the project a vector from the current model."""
    from shared.embedding import get_embedder
    from shared.search.vector_store import ensure_vector_index

    settings = get_settings()
    with session_scope() as session:
        job = store.claim(session, job_id, "embed")
        if job is None:
            return
        project = session.scalars(select(Project).where(Project.name == job.project)).first()
        project_id = project.id if project else -1
    embedder = get_embedder(settings)
    embedded = reused = 0
    if embedder is not None:
        ensure_vector_index(get_engine(), embedder.model_id, embedder.dim)
        pending_filter = (
            ChunkRow.project_id == project_id,
            or_(ChunkRow.embedding.is_(None), ChunkRow.model_id.is_distinct_from(embedder.model_id)),
        )
        with session_scope() as session:
            total = session.scalar(select(func.count()).select_from(ChunkRow).where(*pending_filter)) or 0
            store.report_progress(session, job_id, done=0, total=total, step="embedding")
        done = 0
        while True:
            with session_scope() as session:
                if store.is_cancelled(session, job_id):
                    raise JobCancelled(job_id)
                rows = session.execute(
                    select(ChunkRow.id, ChunkRow.text_sha, ChunkRow.breadcrumb, ChunkRow.text)
                    .where(*pending_filter)
                    .order_by(ChunkRow.id)
                    .limit(settings.embed_batch_size)
                ).all()
                if not rows:
                    break
                shas = list({r.text_sha for r in rows})
                known = dict(
                    session.execute(
                        select(ChunkRow.text_sha, ChunkRow.embedding)
                        .where(
                            ChunkRow.text_sha.in_(shas),
                            ChunkRow.model_id == embedder.model_id,
                            ChunkRow.embedding.is_not(None),
                        )
                        .distinct(ChunkRow.text_sha)
                    ).all()
                )
                todo = [r for r in rows if r.text_sha not in known]
                if todo:
                    vectors = embedder.embed([embed_input(r.breadcrumb, r.text) for r in todo])
                    for r, vec in zip(todo, vectors, strict=True):
                        known[r.text_sha] = vec
                    embedded += len(todo)
                reused += len(rows) - len(todo)
                for r in rows:
                    session.execute(
                        ChunkRow.__table__.update()
                        .where(ChunkRow.id == r.id)
                        .values(embedding=known[r.text_sha], model_id=embedder.model_id)
                    )
                done += len(rows)
                store.report_progress(session, job_id, done=done, total=max(total, done), step="embedding")
    with session_scope() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status != "running" or job.step != "embed":
            raise JobCancelled(job_id)
        previous = job.result or {}
        store.advance(
            session,
            job,
            "index",
            result={
                "embedded": previous.get("embedded", 0) + embedded,
                "embeddings_reused": previous.get("embeddings_reused", 0) + reused,
                "embedding_model": embedder.model_id if embedder else None,
            },
        )
    send("index", job_id)


def lexical_doc(row: ChunkRow, project: str, updated_at: Any) -> LexicalDoc:
    """The lexical engine's view of a chunk row."""
    return LexicalDoc(
        chunk_id=row.id,
        project=project,
        source=row.source,
        breadcrumb=row.breadcrumb,
        section=row.section_title,
        content=row.text,
        level=row.level,
        tags=tuple(row.tags or ()),
        updated_at=updated_at,
    )


def run_index_step(job_id: str, send: Dispatcher = dispatch) -> None:
    """Step 3: bring the lexical engine in line with the changed and removed documents."""
    from shared.search.lexical_factory import get_lexical_index

    with session_scope() as session:
        job = store.claim(session, job_id, "index")
        if job is None:
            return
        project_name = job.project or ""
        changed = list(job.result.get("changed", []))
        removed = list(job.result.get("removed", []))
    index = get_lexical_index(get_settings())
    if changed or removed:
        index.delete_sources(project_name, changed + removed)
    indexed = 0
    batch_docs = 50
    for start in range(0, len(changed), batch_docs):
        paths = changed[start : start + batch_docs]
        with session_scope() as session:
            if store.is_cancelled(session, job_id):
                raise JobCancelled(job_id)
            rows = session.execute(
                select(ChunkRow, Document.updated_at)
                .join(Document, ChunkRow.document_id == Document.id)
                .join(Project, Document.project_id == Project.id)
                .where(Project.name == project_name, Document.path.in_(paths))
            ).all()
            index.upsert([lexical_doc(row, project_name, updated) for row, updated in rows])
            indexed += len(rows)
            session.execute(
                Document.__table__.update()
                .where(Document.path.in_(paths), Document.project_id == select(Project.id).where(Project.name == project_name).scalar_subquery())
                .values(indexed_at=func.now())
            )
            store.report_progress(session, job_id, done=start + len(paths), total=len(changed), step="indexing")
    with session_scope() as session:
        job = session.get(Job, job_id, with_for_update=True)
        if job is None or job.status != "running" or job.step != "index":
            raise JobCancelled(job_id)
        if (job.payload.get("source") or {}).get("type") == "vault":
            from shared.vault.sync import record_published  # imports this module: import at call time

            record_published(session, job, project_name, changed, removed)
        store.succeed(session, job, result={"chunks_indexed": indexed, "lexical_engine": index.name})


STEPS: dict[str, Callable[[str, Dispatcher], None]] = {
    "ingest": run_ingest_step,
    "embed": run_embed_step,
    "index": run_index_step,
}


def run_inline(job_id: str) -> None:
    """Run every due step of an ingest job in this process, without a broker (``mem eval``, tests).

    The steps are the same functions the workers run; only the hand-over differs.
    """
    due: list[str] = []

    def collect(step: str, _job_id: str) -> None:
        due.append(step)

    with session_scope() as session:
        job = session.get(Job, job_id)
        if job is None:
            raise ValueError(f"no job {job_id}")
        due.append(job.step)
    while due:
        step = due.pop(0)
        if step in STEPS:
            STEPS[step](job_id, collect)


def ingest_inline(project: str, source: dict[str, Any], submitted_by: str = "cli") -> str:
    """Create an ingest job and run it to completion in this process; returns the job id."""
    with session_scope() as session:
        job, _ = store.create_job(
            session, kind=INGEST_KIND, first_step="ingest", project=project,
            payload={"source": source}, submitted_by=submitted_by,
        )
        job_id = job.id
    run_inline(job_id)
    return job_id
