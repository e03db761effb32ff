"""Request and response bodies of ``/memory/query`` and ``/memory/query/with-context``.

POST takes a JSON body (:class:`QueryBody`); GET takes the same fields in the query string
(:class:`QueryArgs`), with the filters flattened (``level``, ``source_pattern``, ``updated_since``,
``tags``; repeat a key or separate values with commas) or given whole as a JSON ``filters`` object,
and ``weights`` as ``semantic,lexical`` (``0.6,0.4``).
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from api.schemas import Strict, check_project_name
from shared.search.normalise import MAX_QUERY_CHARS

MAX_LIMIT = 100
MAX_CANDIDATES = 500
MAX_CONTEXT_CHUNKS = 5
MAX_TAGS = 20
MAX_LEVELS = 3

QueryMethod = Literal["auto", "hybrid", "semantic", "lexical"]
FusionName = Literal["linear", "rrf"]


def _check_query(value: str) -> str:
    if not value.strip():
        raise ValueError("query must not be empty or only whitespace")
    return value


class QueryWeights(Strict):
    """Linear-fusion weights; they must sum to 1."""

    semantic: float = Field(ge=0.0, le=1.0)
    lexical: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> QueryWeights:
        total = self.semantic + self.lexical
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (semantic {self.semantic} + lexical {self.lexical} = {total:g})")
        return self


class QueryFilters(Strict):
    """Restrict the search; every engine applies the same filters."""

    level: list[int] | None = Field(
        default=None, max_length=MAX_LEVELS, description="Chunk levels: 0 document, 1 section, 2 piece"
    )
    source_pattern: str | None = Field(
        default=None, min_length=1, max_length=512, description="Glob over vault paths, e.g. runbooks/*"
    )
    updated_since: datetime | date | None = Field(default=None, description="ISO 8601 date or date-time")
    tags: list[str] | None = Field(default=None, max_length=MAX_TAGS, description="All of these tags")

    @field_validator("level", mode="before")
    @classmethod
    def _one_or_many_levels(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("level")
    @classmethod
    def _levels_known(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(level not in (0, 1, 2) for level in value):
            raise ValueError("level must be 0 (document), 1 (section) or 2 (piece)")
        return value

    @field_validator("tags")
    @classmethod
    def _tags_clean(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not tag.strip() or len(tag) > 200 for tag in value):
            raise ValueError("tags must be non-empty strings of at most 200 characters")
        return value


class QueryBody(Strict):
    """A search (POST body)."""

    query: str = Field(max_length=MAX_QUERY_CHARS, description="What to look for")
    project: str = Field(description="Project to search")
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    method: QueryMethod = "auto"
    weights: QueryWeights | None = Field(default=None, description="Default 0.6/0.4 (linear), 0.5/0.5 (rrf)")
    fusion: FusionName = "linear"
    candidates: int = Field(default=50, ge=1, le=MAX_CANDIDATES, description="Candidates per engine")
    filters: QueryFilters | None = None
    explain: bool = True

    _query = field_validator("query")(_check_query)

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str) -> str:
        return check_project_name(value)


class ContextQueryBody(QueryBody):
    """A search whose results carry their neighbouring chunks."""

    context_chunks: int = Field(default=1, ge=0, le=MAX_CONTEXT_CHUNKS, description="Neighbours on each side")


def _split_commas(value: Any) -> Any:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        out.extend(part.strip() for part in str(item).split(",") if part.strip())
    return out


class QueryArgs(Strict):
    """A search in the query string (GET)."""

    query: str = Field(max_length=MAX_QUERY_CHARS)
    project: str
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    method: QueryMethod = "auto"
    weights: str | None = Field(default=None, max_length=100, description="semantic,lexical, e.g. 0.7,0.3")
    fusion: FusionName = "linear"
    candidates: int = Field(default=50, ge=1, le=MAX_CANDIDATES)
    explain: bool = True
    level: list[str] | None = Field(default=None, description="Repeat or comma-separate: 1,2")
    source_pattern: str | None = Field(default=None, min_length=1, max_length=512)
    updated_since: str | None = Field(default=None, max_length=64)
    tags: list[str] | None = Field(default=None, description="Repeat or comma-separate")
    filters: str | None = Field(default=None, max_length=4096, description="The filters as a JSON object")

    _query = field_validator("query")(_check_query)
    _lists = field_validator("level", "tags", mode="before")(_split_commas)

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str) -> str:
        return check_project_name(value)

    def parsed_weights(self) -> QueryWeights | None:
        """``weights`` as a :class:`QueryWeights` (``ValueError`` with a readable message if malformed)."""
        if self.weights is None:
            return None
        parts = [p.strip() for p in self.weights.split(",")]
        try:
            semantic, lexical = (float(p) for p in parts)
        except ValueError:
            raise ValueError("weights must be two numbers 'semantic,lexical', e.g. 0.6,0.4") from None
        try:
            return QueryWeights(semantic=semantic, lexical=lexical)
        except ValidationError as exc:
            raise ValueError(exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")) from None

    def parsed_filters(self) -> QueryFilters | None:
        """The filters from ``filters`` (JSON) merged with the flat parameters; ``ValueError`` if malformed."""
        data: dict[str, Any] = {}
        if self.filters is not None:
            try:
                data = json.loads(self.filters)
            except json.JSONDecodeError:
                raise ValueError("filters must be a JSON object") from None
            if not isinstance(data, dict):
                raise ValueError("filters must be a JSON object")
        for key in ("level", "source_pattern", "updated_since", "tags"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if not data:
            return None
        try:
            return QueryFilters.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise ValueError(f"filters.{where}: {first.get('msg', 'invalid')}") from None


class ContextQueryArgs(QueryArgs):
    """A with-context search in the query string."""

    context_chunks: int = Field(default=1, ge=0, le=MAX_CONTEXT_CHUNKS)


# --- responses (documentation in /openapi.json) -----------------------------------------------


class RouteOut(BaseModel):
    method: Literal["hybrid", "semantic", "lexical"]
    reason: str
    rule: str


class BreakdownOut(BaseModel):
    semantic: float = Field(description="Min-max normalised semantic score (0 when not returned)")
    lexical: float = Field(description="Min-max normalised BM25 score (0 when not returned)")
    semantic_raw: float | None = Field(description="Cosine similarity (1 - pgvector cosine distance)")
    lexical_raw: float | None = Field(description="BM25 score")
    semantic_rank: int | None
    lexical_rank: int | None
    semantic_weight: float
    lexical_weight: float
    fusion: FusionName
    reason: str


class NeighbourOut(BaseModel):
    id: str
    ordinal: int
    level: int
    section: str
    anchor: str
    text: str


class ContextOut(BaseModel):
    previous: list[NeighbourOut]
    next: list[NeighbourOut]
    section_title: str
    breadcrumb_full: str
    vault_url: str | None


class ResultOut(BaseModel):
    id: str
    project: str
    text: str
    source: str = Field(description="Document path inside the project")
    section: str
    anchor: str
    level: int
    breadcrumb: str
    tags: list[str]
    updated_at: str | None
    lines: list[int]
    score: float
    breakdown: BreakdownOut | None = None
    context: ContextOut | None = None


class FacetsOut(BaseModel):
    levels: dict[str, int]
    sources: dict[str, int] = Field(description="Top folders")
    months: dict[str, int]
    tags: dict[str, int]


class MetricsOut(BaseModel):
    embed_ms: float | None
    semantic_ms: float | None
    lexical_ms: float | None
    fusion_ms: float
    total_ms: float
    semantic_engine: str | None
    lexical_engine: str | None
    candidates: dict[str, int]


class QueryResponse(BaseModel):
    query: str
    project: str
    search_method: Literal["hybrid", "semantic", "lexical"]
    route: RouteOut
    entities: dict[str, list[str]]
    filters: dict[str, Any]
    results: list[ResultOut]
    facets: FacetsOut
    metrics: MetricsOut
    warnings: list[str]
