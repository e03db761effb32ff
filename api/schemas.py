"""Request and response bodies (pydantic): validated on the way in, published in ``/openapi.json``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from shared.vault.paths import (
    MAX_PROJECT_CHARS,
    PROJECT_PATTERN,
    PROJECT_RULE,
    UnsafePath,
    validate_project_name,
)

#: A project name, with its rule in the published JSON Schema (so clients and the contract fuzzer see it).
ProjectName = Annotated[str, StringConstraints(pattern=PROJECT_PATTERN, min_length=1, max_length=MAX_PROJECT_CHARS)]


def check_project_name(value: str) -> str:
    """Projects are top-level vault folders, named by the vault's one rule (``PROJECT_PATTERN``)."""
    try:
        return validate_project_name(value)
    except UnsafePath:
        raise ValueError(f"project must be {PROJECT_RULE}") from None


class Strict(BaseModel):
    """Unknown fields are errors: a typo in a field name must not be silently ignored."""

    model_config = ConfigDict(extra="forbid")


class InlineDocument(Strict):
    path: str = Field(min_length=1, max_length=1024, description="Path inside the project folder, e.g. runbooks/deploy.md")
    content: str = Field(max_length=5_000_000, description="Markdown text")


class InlineSource(Strict):
    type: Literal["inline"]
    documents: list[InlineDocument] = Field(default_factory=list, max_length=10_000)
    delete: list[str] = Field(default_factory=list, max_length=10_000, description="Paths to remove from the project")
    replace: bool = Field(default=False, description="Treat the documents as the whole project: remove the rest")


class DirectorySource(Strict):
    type: Literal["directory"]
    path: str = Field(
        min_length=1, max_length=4096, description="A directory inside the server's vault, relative to its root"
    )


class GitSource(Strict):
    type: Literal["git"]
    url: str = Field(min_length=1, max_length=2048)
    ref: str = Field(default="main", min_length=1, max_length=255)
    subdir: str | None = Field(default=None, max_length=1024)


class IngestRequest(Strict):
    project: ProjectName = Field(description="Project name (a top-level vault folder)")
    source: InlineSource | DirectorySource | GitSource = Field(discriminator="type")

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str) -> str:
        return check_project_name(value)


class Progress(BaseModel):
    done: int
    total: int
    fraction: float
    current_step: str


class JobOut(BaseModel):
    id: str
    kind: str
    project: str | None
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    step: str
    progress: Progress
    attempts: int
    error: str | None
    submitted_by: str
    result: dict[str, Any]
    created_at: str | None
    updated_at: str | None
    started_at: str | None
    finished_at: str | None


class ProjectOut(BaseModel):
    name: str
    documents: int
    chunks: int
    embedded_chunks: int
    indexed_commit: str | None
    updated_at: str | None


class ProjectList(BaseModel):
    projects: list[ProjectOut]


class SkillOut(BaseModel):
    project: str
    path: str
    name: str
    title: str
    description: str
    tags: list[str]
    updated_at: str | None


class SkillList(BaseModel):
    skills: list[SkillOut]


class SkillQuery(Strict):
    project: ProjectName | None = None
    tag: str | None = Field(default=None, max_length=200)


class Health(BaseModel):
    status: Literal["ok"]


class ReadyCheck(BaseModel):
    ok: bool
    detail: str


class Ready(BaseModel):
    status: Literal["ready", "degraded", "unavailable"]
    checks: dict[str, ReadyCheck]


class ProblemOut(BaseModel):
    type: str
    title: str
    status: int
    detail: str
    request_id: str | None = None
