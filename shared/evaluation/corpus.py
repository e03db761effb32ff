"""Ingest an evaluation corpus through the real pipeline, once: cached by corpus hash.

The project is named after the hash of the corpus and of the chunking recipe (chunker version and budget) (``eval-<hash>``), so a
re-run finds it and skips the ingest; a run interrupted half way resumes (unchanged documents are not
re-chunked and vectors already stored are kept). Queries run against a Tantivy index of the corpus
alone (:func:`evaluation_settings`), built from the database rows when it is missing or short.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import func, select

from shared.config import Settings
from shared.db.engine import session_scope
from shared.db.models import ChunkRow, Document, Project
from shared.evaluation.datasets import Dataset
from shared.ingest.pipeline import INGEST_KIND, lexical_doc, run_inline
from shared.jobs import store
from shared.vault.markdown import chunker_recipe

REINDEX_BATCH = 2000


def eval_project_name(dataset: Dataset, settings: Settings) -> str:
    """The project that holds this corpus as chunked with these settings."""
    key = f"{dataset.corpus_sha}\0{chunker_recipe(settings.chunk_max_tokens, settings.chunk_overlap_tokens)}"
    return "eval-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def corpus_folder(dataset: Dataset, settings: Settings, project: str) -> Path:
    """A folder of markdown files to ingest: the dataset itself, or BEIR documents written out once."""
    if dataset.kind == "markdown":
        return dataset.root
    folder = settings.resolved_data_dir / "eval-corpora" / project
    done = folder / ".complete"
    if done.exists():
        return folder
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for path, text in dataset.documents():
        (tmp / path).write_text(text, encoding="utf-8")
    (tmp / ".complete").write_text(dataset.corpus_sha)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


def _ingested_before(project: str) -> bool:
    """True when an ingest of ``project`` ran to completion (documents it skipped stay skipped)."""
    from shared.db.models import Job

    with session_scope() as session:
        found = session.scalar(
            select(Job.id).where(Job.project == project, Job.kind == INGEST_KIND, Job.status == "succeeded").limit(1)
        )
    return found is not None


def _state(project: str, model_id: str | None) -> tuple[int, int, int]:
    """(documents, chunks, chunks lacking a vector of ``model_id``) of ``project``."""
    with session_scope() as session:
        project_id = session.scalar(select(Project.id).where(Project.name == project))
        if project_id is None:
            return 0, 0, 0
        docs = session.scalar(select(func.count()).select_from(Document).where(Document.project_id == project_id))
        chunks = session.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.project_id == project_id))
        pending = 0
        if model_id is not None:
            pending = session.scalar(
                select(func.count())
                .select_from(ChunkRow)
                .where(ChunkRow.project_id == project_id, ChunkRow.model_id.is_distinct_from(model_id))
            )
        return int(docs or 0), int(chunks or 0), int(pending or 0)


def reindex_lexical(project: str, settings: Settings) -> int:
    """Rebuild the lexical index of ``project`` from its chunk rows; returns how many were indexed."""
    from shared.search.lexical_factory import get_lexical_index

    index = get_lexical_index(settings)
    with session_scope() as session:
        sources = list(session.scalars(select(Document.path).join(Project).where(Project.name == project)))
    index.delete_sources(project, sources)
    indexed = 0
    last_id = ""
    while True:
        with session_scope() as session:
            rows = session.execute(
                select(ChunkRow, Document.updated_at)
                .join(Document, ChunkRow.document_id == Document.id)
                .join(Project, Document.project_id == Project.id)
                .where(Project.name == project, ChunkRow.id > last_id)
                .order_by(ChunkRow.id)
                .limit(REINDEX_BATCH)
            ).all()
            if not rows:
                return indexed
            index.upsert([lexical_doc(row, project, updated) for row, updated in rows])
            indexed += len(rows)
            last_id = rows[-1][0].id


def _run_with_progress(job_id: str, show: bool) -> None:
    """Run the job's steps in a thread while this thread draws a progress bar from the job row."""
    from tqdm import tqdm

    failure: list[BaseException] = []

    def work() -> None:
        try:
            run_inline(job_id)
        except BaseException as exc:  # re-raised in the caller's thread below
            failure.append(exc)

    worker = threading.Thread(target=work, name=f"eval-ingest-{job_id[:8]}", daemon=True)
    worker.start()
    bar = tqdm(total=0, unit="chunk", desc="ingesting", file=sys.stderr, disable=not show)
    try:
        while worker.is_alive():
            worker.join(0.5)
            with session_scope() as session:
                view = store.get_job(session, job_id)
            if view is not None:
                bar.total = max(view.progress_total, 1)
                bar.n = min(view.progress_done, bar.total)
                bar.set_postfix_str(view.progress_step)
                bar.refresh()
    finally:
        bar.close()
    if failure:
        raise failure[0]


def ensure_ingested(
    dataset: Dataset,
    settings: Settings,
    *,
    show_progress: bool = True,
    log: Callable[[str], None] = lambda _msg: None,
) -> str:
    """Make sure the corpus is ingested, embedded and lexically indexed; returns its project name."""
    from shared.embedding import get_embedder
    from shared.search.lexical import LexicalUnavailable
    from shared.search.lexical_factory import get_lexical_index, reset_lexical_indexes

    project = eval_project_name(dataset, settings)
    embedder = get_embedder(settings)
    model_id = embedder.model_id if embedder is not None else None
    expected_docs = len(dataset.doc_paths)
    docs, chunks, pending = _state(project, model_id)
    if not _ingested_before(project) or pending or chunks == 0:
        log(f"ingesting {expected_docs} documents into project {project} (cached for later runs)")
        folder = corpus_folder(dataset, settings, project)
        started = time.monotonic()
        with session_scope() as session:
            job, _ = store.create_job(
                session,
                kind=INGEST_KIND,
                first_step="ingest",
                project=project,
                payload={"source": {"type": "directory", "path": str(folder)}},
                submitted_by="mem eval",
            )
            job_id = job.id
        _run_with_progress(job_id, show_progress)
        with session_scope() as session:
            view = store.get_job(session, job_id)
        if view is None or view.status != "succeeded":
            raise RuntimeError(f"ingest job {job_id} did not succeed: {view.error if view else 'missing'}")
        log(f"ingested in {time.monotonic() - started:.0f}s: {view.result.get('chunks_written', 0)} chunks")
        docs, chunks, pending = _state(project, model_id)
    else:
        log(f"corpus already ingested in project {project}: {docs} documents, {chunks} chunks")
    lexical = evaluation_settings(settings, project)
    try:
        index = get_lexical_index(lexical)
    except LexicalUnavailable:
        if lexical is settings:
            raise
        # The evaluation's own index is a cache: one written with an older schema is simply rebuilt.
        log("the evaluation's lexical index has an older schema; rebuilding it")
        reset_lexical_indexes()
        shutil.rmtree(lexical.resolved_data_dir, ignore_errors=True)
        index = get_lexical_index(lexical)
    if index.count(project) != chunks:
        log(f"building the evaluation's lexical index of {project} from the database ({chunks} chunks)")
        reindex_lexical(project, lexical)
    return project


def evaluation_settings(settings: Settings, project: str) -> Settings:
    """The settings queries of an evaluation run with: a Tantivy index holding this corpus alone.

    Tantivy computes BM25's document frequencies over its whole index, so the service's shared index
    (every project, and every other evaluated corpus) would make a corpus's scores depend on what
    else was ingested in the data directory. OpenSearch keeps one index per project already.
    """
    if settings.lexical_engine != "tantivy":
        return settings
    folder = settings.resolved_data_dir / "eval-lexical" / f"{project}-{_lexical_code_fingerprint()}"
    return settings.model_copy(update={"data_dir": folder})


def _lexical_code_fingerprint() -> str:
    """Changes whenever the code that decides what Tantivy indexes changes, so a cached evaluation
    index is never scored with stale field values (a schema check alone would not notice)."""
    from shared.search import normalise, tantivy_index

    digest = hashlib.sha256()
    for module in (tantivy_index, normalise):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:10]
