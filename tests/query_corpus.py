"""The query tests' corpus: the fixture vault ingested once per test session into two projects.

Ingesting runs the real pipeline in process (chunk, embed with the local model, index in Tantivy); the
result is cached in this module so every query test module shares one ingest, whatever imports it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "query"
VAULT = FIXTURES / "vault"
OTHER = FIXTURES / "other"


@dataclass(frozen=True)
class QueryCorpus:
    """Project ``alpha`` holds the fixture vault, project ``beta`` another team's document."""

    alpha: str
    beta: str


_corpus: QueryCorpus | None = None


def _documents(root: Path) -> list[dict[str, str]]:
    return [
        {"path": p.relative_to(root).as_posix(), "content": p.read_text(encoding="utf-8")}
        for p in sorted(root.rglob("*.md"))
    ]


@pytest.fixture
def query_corpus(database: str) -> QueryCorpus:
    """Both projects, ingested on first use (the chunks are embedded and lexically indexed)."""
    global _corpus
    if _corpus is None:
        from shared.ingest.pipeline import ingest_inline
        from shared.search.lexical_factory import reset_lexical_indexes

        reset_lexical_indexes()
        suffix = uuid.uuid4().hex[:8]
        corpus = QueryCorpus(alpha=f"qa-{suffix}", beta=f"qb-{suffix}")
        for project, root in ((corpus.alpha, VAULT), (corpus.beta, OTHER)):
            ingest_inline(project, {"type": "inline", "documents": _documents(root)})
        _corpus = corpus
    return _corpus
