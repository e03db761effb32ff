"""Request and response bodies of ``/memory/lessons``, ``/memory/context`` and ``/memory/diagnose``.

A log travels as JSON text (``log``) or, when it is binary or not UTF-8, as ``log_base64``; both are
decoded with replacement characters, so no byte sequence is refused or crashes anything.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, StrictBool, model_validator

from api.schemas import ProjectName, Strict
from shared.diagnosis.lessons import MAX_LIMIT, MAX_SOLUTION_CHARS, MAX_SOURCE_CHARS, MAX_TITLE_CHARS
from shared.diagnosis.symptom import MAX_SYMPTOM_CHARS

SHA_PATTERN = r"^[0-9a-fA-F]{64}$"
MAX_TOOL_CHARS = 40
MAX_CONTEXT_LIMIT = 50

Sha = str


class LogFields(Strict):
    """A log as text or base64 (at most one of them)."""

    log: str | None = Field(default=None, description="The CI log as text")
    log_base64: str | None = Field(default=None, description="The CI log as base64 (binary or non-UTF-8 logs)")

    @model_validator(mode="after")
    def _one_log(self) -> LogFields:
        if self.log is not None and self.log_base64 is not None:
            raise ValueError("give either log or log_base64, not both")
        return self


class LessonCreate(LogFields):
    """A fix to remember; found again by the log's signature, a ``sig_sha`` or a symptom text."""

    project: ProjectName
    tool: str = Field(min_length=1, max_length=MAX_TOOL_CHARS, description="npm, cargo, pytest, ... or auto (with a log)")
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    solution: str = Field(min_length=1, max_length=MAX_SOLUTION_CHARS)
    source: str = Field(default="", max_length=MAX_SOURCE_CHARS, description="Where the fix comes from (PR, runbook)")
    sig_sha: Sha | None = Field(default=None, pattern=SHA_PATTERN, description="A known failure signature")
    symptom: str | None = Field(default=None, max_length=MAX_SYMPTOM_CHARS, description="The failure in words")


class OutcomeBody(Strict):
    """Whether applying the lesson fixed the failure."""

    worked: StrictBool


class LessonOut(BaseModel):
    id: int
    project: str
    tool: str
    sig_sha: str | None
    sym_sha: str | None
    normalised: str
    title: str
    solution: str
    source: str
    created_by: str
    success_count: int
    failure_count: int
    success_rate: float | None
    match: Literal["sig_sha", "sym_sha", "keywords", "filter"]
    created_at: str | None
    updated_at: str | None


class LessonListArgs(Strict):
    """Filters of ``GET /memory/lessons`` (all optional; every one given must match)."""

    sig_sha: Sha | None = Field(default=None, pattern=SHA_PATTERN)
    sym_sha: Sha | None = Field(default=None, pattern=SHA_PATTERN)
    project: ProjectName | None = None
    tool: str | None = Field(default=None, min_length=1, max_length=MAX_TOOL_CHARS)
    limit: int = Field(default=20, ge=1, le=MAX_LIMIT)


class LessonList(BaseModel):
    count: int
    lessons: list[LessonOut]


class ContextArgs(Strict):
    """``GET /memory/context``: a symptom text and/or a signature hash."""

    query: str | None = Field(default=None, min_length=1, max_length=MAX_SYMPTOM_CHARS, description="The failure in words")
    sig_sha: Sha | None = Field(default=None, pattern=SHA_PATTERN)
    tool: str = Field(default="auto", min_length=1, max_length=MAX_TOOL_CHARS)
    project: ProjectName | None = Field(default=None, description="Search this project (default: all you may see)")
    limit: int = Field(default=5, ge=1, le=MAX_CONTEXT_LIMIT)
    optimize: bool = Field(default=False, description="Compress the results with the context optimizer")


class ContextBody(ContextArgs, LogFields):
    """``POST /memory/context``: the same, and a log whose signature is looked up."""


class ContextResult(BaseModel):
    """One answer: a lesson (tier 1, with ``solution``) or a chunk found by search (tiers 2 and 3)."""

    source: str
    title: str
    content: str
    solution: str | None = None
    score: float
    project: str | None = None
    lesson_id: int | None = None
    match: Literal["sig_sha", "sym_sha", "keywords", "filter"] | None = None
    success_rate: float | None = None
    similarity: float | None = Field(default=None, description="Cosine similarity to the query (search tiers)")
    anchor: str | None = None
    ccr_hash: str | None = Field(default=None, description="With optimize: where the uncompressed text is kept")


class TierTried(BaseModel):
    tier: int
    name: str
    results: int
    projects: list[str] | None = None
    skipped: str | None = None
    error: str | None = None


class ContextOut(BaseModel):
    tier: int | None
    confidence: Literal["high", "medium", "low", "none"]
    results: list[ContextResult]
    tiers_tried: list[TierTried]
    query: str | None
    signature: dict[str, Any] | None
    warnings: list[str]
    optimizer: dict[str, Any] | None = Field(default=None, description="Token totals when optimize=true")


class DiagnoseBody(LogFields):
    """A failed CI log to diagnose in a project."""

    project: ProjectName
    tool: str = Field(default="auto", min_length=1, max_length=MAX_TOOL_CHARS)
