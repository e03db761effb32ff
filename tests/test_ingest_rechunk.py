"""A document is re-chunked when the recipe that cut it changes, not only when its bytes do."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from shared.db.engine import session_scope
from shared.db.models import ChunkRow, Document, Project
from shared.jobs import store
from shared.vault.markdown import chunker_recipe

LONG = "# Ops\n\n## Restart\n\n" + "\n\n".join(
    f"Step {i}: restart the ingest worker {i} and check the queue depth of pool {i}." for i in range(40)
)


def _ingest(project: str) -> dict:
    from shared.ingest.pipeline import ingest_inline

    job_id = ingest_inline(project, {"type": "inline", "documents": [{"path": "ops.md", "content": LONG}]})
    with session_scope() as session:
        job = store.get_job(session, job_id)
        assert job is not None and job.status == "succeeded", job and job.error
        return dict(job.result)


def _chunks(project: str) -> tuple[str, list[int]]:
    with session_scope() as session:
        doc = session.scalars(select(Document).join(Project).where(Project.name == project)).one()
        counts = list(session.scalars(
            select(ChunkRow.token_count).where(ChunkRow.document_id == doc.id).order_by(ChunkRow.ordinal)
        ))
        return doc.chunker, counts


def test_changing_the_chunk_budget_rechunks_unchanged_files(settings, project_name, monkeypatch) -> None:
    from shared.config import get_settings

    first = _ingest(project_name)
    assert first["changed"] == ["ops.md"]
    recipe, before = _chunks(project_name)
    assert recipe == chunker_recipe(settings.chunk_max_tokens, settings.chunk_overlap_tokens)
    assert _ingest(project_name)["changed"] == []  # same bytes, same recipe: skipped

    monkeypatch.setenv("MEM_CHUNK_MAX_TOKENS", "64")
    monkeypatch.setenv("MEM_CHUNK_OVERLAP_TOKENS", "8")
    get_settings.cache_clear()
    try:
        again = _ingest(project_name)
        recipe, after = _chunks(project_name)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    assert again["changed"] == ["ops.md"], "a new budget must re-chunk a file whose bytes did not change"
    assert recipe == chunker_recipe(64, 8)
    assert len(after) > len(before) and max(after) <= 64


@pytest.mark.parametrize("stored", ["", "v1:256:32"])
def test_rows_cut_by_an_older_chunker_are_rechunked(settings, project_name, stored) -> None:
    _ingest(project_name)
    with session_scope() as session:
        doc = session.scalars(select(Document).join(Project).where(Project.name == project_name)).one()
        doc.chunker = stored  # as a row from before the column, or from an older chunker version, looks
    assert _ingest(project_name)["changed"] == ["ops.md"]
    assert _chunks(project_name)[0] == chunker_recipe(settings.chunk_max_tokens, settings.chunk_overlap_tokens)
