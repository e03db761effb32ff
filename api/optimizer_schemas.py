"""Request and response bodies of ``POST /memory/optimize`` and ``GET /memory/ccr/<hash>``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from api.schemas import Strict, check_project_name
from shared.config import OptimizerTokenizer
from shared.search.normalise import MAX_QUERY_CHARS

MAX_CHUNKS = 500
MAX_RETRIEVE = 50
MAX_BUDGET_TOKENS = 10_000_000
MAX_CHUNK_ID_CHARS = 200
# A chunk's text is bounded by MEM_OPTIMIZER_MAX_INPUT_BYTES over all chunks (413), not per field (400).

ChunkType = Literal["auto", "json", "log", "diff", "code", "text"]


class OptimizeChunkIn(Strict):
    """One piece of context: ``text``, or ``base64`` for bytes that are not UTF-8 (mixed encodings,
    binary); base64 is decoded line by line as UTF-8, else cp1252, else Latin-1."""

    id: str | None = Field(default=None, max_length=MAX_CHUNK_ID_CHARS, description="Caller's id, echoed back")
    text: str | None = Field(default=None, description="The content")
    base64: str | None = Field(default=None, description="The content as base64 bytes (instead of text)")
    type: ChunkType = Field(default="auto", description="Content type; auto detects it")

    @model_validator(mode="after")
    def _one_content(self) -> OptimizeChunkIn:
        if (self.text is None) == (self.base64 is None):
            raise ValueError("give exactly one of text and base64")
        return self


class OptimizeRequest(Strict):
    """Optimize the given ``chunks``, or retrieve ``query`` from ``project`` first and optimize the results."""

    chunks: list[OptimizeChunkIn] | None = Field(
        default=None, max_length=MAX_CHUNKS, description="Context to optimize, in rank order"
    )
    query: str | None = Field(
        default=None, max_length=MAX_QUERY_CHARS,
        description="What the context is for: with chunks it keeps matching JSON items; without, it is searched",
    )
    project: str | None = Field(
        default=None,
        description="Project of the CCR originals (and the one searched when no chunks are given). Without "
        "it, CCR originals belong to no project and only callers scoped to every project can read them.",
    )
    budget_tokens: int | None = Field(
        default=None, ge=0, le=MAX_BUDGET_TOKENS,
        description="Leave out trailing chunks past this many tokens (counted as totals.tokenizer says)",
    )
    limit: int = Field(default=10, ge=1, le=MAX_RETRIEVE, description="Results to retrieve (query mode only)")

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str | None) -> str | None:
        return None if value is None else check_project_name(value)

    @model_validator(mode="after")
    def _chunks_or_query(self) -> OptimizeRequest:
        retrievable = bool(self.query and self.query.strip()) and self.project is not None
        if self.chunks is None and not retrievable:
            raise ValueError("give chunks, or a query and a project to retrieve them from")
        return self


class OptimizedChunkOut(BaseModel):
    """One chunk after optimization."""

    id: str | None
    text: str
    type: str = Field(description="json, log, diff, code, text, config, binary or unknown (optimizer off)")
    detector: str
    label: str
    tokens_before: int
    tokens_after: int
    ratio: float = Field(description="tokens_after / tokens_before")
    ccr_hash: str | None = Field(description="GET /memory/ccr/<hash> returns the original")
    ms: float
    reason: str | None = Field(description="Why the chunk was passed through or left out; null when compressed")
    omitted: bool
    decode_note: str | None = Field(default=None, description="How base64 content was decoded, when not UTF-8")
    source: str | None = Field(default=None, description="Vault path of a retrieved chunk")


class OptimizeTotals(BaseModel):
    """Sums over the chunks, and the tokenizer that counted every token number of the answer."""

    chunks: int
    tokens_before: int
    tokens_after: int
    ratio: float
    ms: float
    omitted: int
    budget_tokens: int | None
    tokenizer: OptimizerTokenizer = Field(
        description="What counted the tokens (MEM_OPTIMIZER_TOKENIZER): cl100k_base or o200k_base (OpenAI BPE) "
        "or embedding (the embedding model's WordPiece)"
    )


class RetrievalOut(BaseModel):
    """What the search found before optimization (query mode)."""

    search_method: str
    results: int
    warnings: list[str]


class OptimizeResponse(BaseModel):
    optimizer: Literal["on", "off"] = Field(description="off: MEM_CONTEXT_OPTIMIZER=off, chunks are unchanged")
    project: str | None
    chunks: list[OptimizedChunkOut]
    totals: OptimizeTotals
    retrieval: RetrievalOut | None = None


class CCREntryOut(BaseModel):
    """An original kept under its CCR hash."""

    hash: str
    project: str | None
    original: str = Field(description="The text exactly as it was before compression")
    created_at: str = Field(description="When it was stored (ISO 8601, UTC)")
