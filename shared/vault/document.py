"""What the chunker produces: a parsed markdown document and its chunks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Chunk levels. L0 is the whole document (its title, front matter summary and lead text),
# L1 a section between two headings, L2 a piece of a section too long for the model.
LEVEL_DOCUMENT = 0
LEVEL_SECTION = 1
LEVEL_PIECE = 2


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit of a document."""

    id: str  # stable: derived from (project, path, ordinal)
    ordinal: int  # position in the document, 0-based
    level: int  # LEVEL_DOCUMENT | LEVEL_SECTION | LEVEL_PIECE
    breadcrumb: str  # "folder > subfolder > Title > Section > Subsection"
    section_title: str
    anchor: str  # GitHub-style slug of the section heading ("" for L0)
    text: str
    token_count: int
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    text_sha: str  # sha256 of text, the embedding cache key


@dataclass(frozen=True)
class Section:
    """A heading-delimited section of a markdown file (also served by the vault read API)."""

    title: str
    level: int  # heading depth 1..6; 0 for text before the first heading
    anchor: str
    start_line: int
    end_line: int
    content: str


@dataclass
class ParsedDocument:
    """A markdown file split into front matter, sections and chunks."""

    path: str  # vault-relative POSIX path
    title: str
    front_matter: dict[str, Any]
    tags: list[str]
    content_sha: str
    sections: list[Section] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
