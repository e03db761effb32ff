"""Request and response bodies of the vault, GRC and webhook endpoints (published in ``/openapi.json``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from api.schemas import Strict, check_project_name


class CommitOut(BaseModel):
    sha: str
    author: str
    date: str
    message: str


class VaultProjectOut(BaseModel):
    name: str
    path: str
    file_count: int
    updated_at: str | None
    last_commit: CommitOut | None


class VaultProjectList(BaseModel):
    projects: list[VaultProjectOut]


class DirectoryQuery(Strict):
    path: str = Field(default="", max_length=1024, description="A folder inside the project; empty for its top")


class DirectoryEntryOut(BaseModel):
    name: str
    path: str
    file_count: int
    updated_at: str | None


class FileEntryOut(BaseModel):
    name: str
    path: str
    size: int
    title: str | None
    updated_at: str | None
    last_commit: CommitOut | None


class DirectoryListing(BaseModel):
    project: str
    path: str
    directories: list[DirectoryEntryOut]
    files: list[FileEntryOut]
    truncated: bool = Field(description="True when the folder has more entries than one listing shows")


class FileQuery(Strict):
    highlight: str | None = Field(
        default=None, max_length=64, description="A chunk id from a search hit: marks the section it came from"
    )


class SectionOut(BaseModel):
    title: str
    level: int
    anchor: str
    start_line: int
    end_line: int
    content: str
    highlighted: bool


class HighlightOut(BaseModel):
    chunk_id: str
    section_index: int | None
    anchor: str | None
    chunk_start_line: int
    chunk_end_line: int
    stale: bool = Field(description="The file changed since the chunk was indexed; line numbers may be off")
    sections: list[SectionOut] = Field(description="The highlighted section with its neighbours")


class VaultFileOut(BaseModel):
    project: str
    path: str
    title: str
    size: int
    updated_at: str | None
    last_commit: CommitOut | None
    content_sha: str
    content: str
    sections: list[SectionOut]
    highlight: HighlightOut | None = None


class GenerateRequest(Strict):
    project: str = Field(description="Project whose lessons and skills index are written into the vault")

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str) -> str:
        return check_project_name(value)


class DraftRequest(Strict):
    document_path: str = Field(
        min_length=3, max_length=1024, description="Vault path '<project>/<path inside the project>.md'"
    )
    content: str | None = Field(max_length=5_000_000, description="The new markdown text; null deletes the document")
    message: str = Field(min_length=1, max_length=5000, description="Commit message; its first line titles the PR")
    base_commit: str | None = Field(
        default=None, max_length=64, description="The commit the edit was based on; 409 if the document changed since"
    )


class DraftOut(BaseModel):
    branch: str
    pr_number: int
    pr_url: str | None
    commit: str
    operation: Literal["create", "update", "delete"]


class StatusQuery(Strict):
    pr: int = Field(ge=1, le=2**31 - 1, description="Pull request number")


class CiStatusOut(BaseModel):
    context: str
    status: str
    target_url: str | None
    description: str | None


class CiOut(BaseModel):
    state: str
    statuses: list[CiStatusOut]


class DraftStatusOut(BaseModel):
    pr_number: int
    state: Literal["open", "merged", "closed"]
    title: str
    branch: str
    base: str
    pr_url: str | None
    mergeable: bool | None
    merged_at: str | None
    merge_commit: str | None
    ci: CiOut


class WebhookOut(BaseModel):
    status: Literal["queued", "ignored", "duplicate"]
    reason: str
    job_id: str | None
    delivery_id: str | None
