"""The lexical (BM25) engine interface; Tantivy and OpenSearch implement it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from shared.search.normalise import camel_case_parts

# What every backend indexes and weighs alike, so one query ranks the same on each; the values were
# chosen by `mem eval` (docs/evaluation.md, "Quality work").
# The words of the chunk's CamelCase identifiers, searched beside the chunk text with this weight.
IDENTIFIER_PARTS_FIELD = "identifier_parts"
IDENTIFIER_PARTS_BOOST = 1.0
# LexicalQuery.fuzzy: each term of at least MIN_FUZZY_CHARS characters matches one edit away (two
# edits from TWO_EDITS_MIN_CHARS), at most MAX_FUZZY_TERMS of them, each adding FUZZY_BOOST flat.
FUZZY_BOOST = 0.5
MIN_FUZZY_CHARS = 5
TWO_EDITS_MIN_CHARS = 10
MAX_FUZZY_TERMS = 8


class LexicalUnavailable(RuntimeError):
    """The lexical engine cannot answer (down, misconfigured, timed out)."""


@dataclass(frozen=True)
class LexicalDoc:
    """One chunk as the lexical engine stores it."""

    chunk_id: str
    project: str
    source: str  # vault-relative path of the document
    breadcrumb: str
    section: str
    content: str
    level: int
    tags: tuple[str, ...] = ()
    updated_at: datetime | None = None


@dataclass(frozen=True)
class LexicalFilters:
    """Filters every lexical query honours (the vector store honours the same ones)."""

    levels: tuple[int, ...] = ()
    source_pattern: str | None = None  # glob over vault paths, e.g. "runbooks/*"
    updated_since: datetime | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class LexicalHit:
    """A chunk id and its raw BM25 score (higher is better)."""

    chunk_id: str
    score: float
    project: str = ""
    source: str = ""


@dataclass
class LexicalQuery:
    """A lexical search: the text, the projects the caller may see, and filters."""

    text: str
    projects: Sequence[str]
    limit: int = 50
    filters: LexicalFilters = field(default_factory=LexicalFilters)
    bearer_token: str | None = None  # forwarded to OpenSearch when set (JWT realm)
    # Words (identifiers, error codes) also matched within a small edit distance, for typos; a
    # backend without fuzzy matching ignores them.
    fuzzy: tuple[str, ...] = ()


@runtime_checkable
class LexicalIndex(Protocol):
    """A BM25 index of chunks, partitioned by project."""

    name: str

    def upsert(self, docs: Sequence[LexicalDoc]) -> None:
        """Add or replace chunks (by ``chunk_id``) and make them searchable before returning."""
        ...

    def delete_sources(self, project: str, sources: Sequence[str]) -> None:
        """Remove every chunk of the given documents of ``project``."""
        ...

    def delete_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id."""
        ...

    def search(self, query: LexicalQuery) -> list[LexicalHit]:
        """Best-first hits restricted to ``query.projects`` and ``query.filters``."""
        ...

    def count(self, project: str | None = None) -> int:
        """How many chunks are indexed (in one project, or in all)."""
        ...

    def health(self) -> dict[str, object]:
        """A small status report for ``/ready``; raises :class:`LexicalUnavailable` when down."""
        ...


def validate_lexical_doc(doc: LexicalDoc) -> None:
    """Raise ``ValueError`` naming the field when ``doc`` cannot be indexed by any backend."""
    if not isinstance(doc, LexicalDoc):
        raise ValueError(f"expected a LexicalDoc, got {type(doc).__name__}")
    for name in ("chunk_id", "project", "source"):
        value = getattr(doc, name)
        if not isinstance(value, str) or not value:
            raise ValueError(f"LexicalDoc.{name} must be a non-empty string (chunk {doc.chunk_id!r})")
    if isinstance(doc.level, bool) or not isinstance(doc.level, int):
        raise ValueError(f"LexicalDoc.level must be an int (chunk {doc.chunk_id!r})")
    if doc.updated_at is not None and not isinstance(doc.updated_at, datetime):
        raise ValueError(f"LexicalDoc.updated_at must be a datetime or None (chunk {doc.chunk_id!r})")


def identifier_parts(doc: LexicalDoc) -> str:
    """The :data:`IDENTIFIER_PARTS_FIELD` value of ``doc``, computed here so every backend indexes the same words."""
    return camel_case_parts(doc.content)
