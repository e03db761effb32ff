"""Browse and read the vault working copy: projects, one folder level, one file with its sections.

Every user-supplied path goes through :func:`shared.vault.paths.resolve_vault_path`, so nothing here can
be pointed outside a project folder, at ``.git`` or at a dotfile. Git supplies who changed a file last and
when; a vault that is not a git working copy (a plain folder) falls back to file modification times.

A search hit carries ``source`` (the path inside the project) and ``anchor`` (the section's slug, made by
the same :func:`shared.vault.markdown.parse_sections` that splits the file here), so
``read_file(root, project, source)`` plus the section whose ``anchor`` matches is where the hit came from.
:func:`locate_chunk` turns a chunk id into the section to highlight.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.db.models import ChunkRow, Document, Project
from shared.identity.principal import Principal
from shared.ingest.sources import MARKDOWN_SUFFIXES
from shared.vault.document import Section
from shared.vault.git import CommitInfo, GitError, GitRepo
from shared.vault.markdown import parse_sections
from shared.vault.paths import UnsafePath, resolve_vault_path, validate_project_name

# A folder listing reads the head of each markdown file for its title; titles live in the front matter or
# the first heading, so the head is enough and a huge file costs no more than a small one.
TITLE_HEAD_BYTES = 64 * 1024
MAX_LISTING_ENTRIES = 5000
GIT_TIMEOUT_SECS = 30.0


class VaultNotFound(LookupError):
    """The project, folder or file does not exist in the vault (``str(exc)`` is safe to show)."""


class VaultFileRefused(ValueError):
    """The file exists but cannot be served as text; ``status`` is the HTTP status that says why."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CommitSummary:
    """The last commit that touched a file or folder."""

    sha: str
    author: str
    date: str  # ISO 8601
    message: str

    @classmethod
    def of(cls, info: CommitInfo | None) -> CommitSummary | None:
        """Summarise git's answer (None stays None)."""
        if info is None:
            return None
        return cls(info.sha, info.author, info.date.isoformat(), info.message.splitlines()[0] if info.message else "")


@dataclass(frozen=True)
class ChunkLocation:
    """Where a chunk came from, as the chunks table recorded it at ingest time."""

    chunk_id: str
    project: str
    source: str
    start_line: int
    end_line: int
    anchor: str
    content_sha: str  # sha256 of the file's bytes as ingested: differs from the file's when it changed since


# --------------------------------------------------------------------------------------------------
# helpers


def _repo(root: Path) -> GitRepo | None:
    repo = GitRepo(root, timeout=GIT_TIMEOUT_SECS)
    return repo if repo.is_repo() else None


def _mtime(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()


def _visible_entries(folder: Path) -> list[os.DirEntry[str]]:
    """Entries of ``folder`` without dotfiles, sorted by name."""
    with os.scandir(folder) as entries:
        return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _count_files(folder: Path) -> int:
    """Files under ``folder`` (any depth), not counting dotfiles, dot-folders or symlinked folders."""
    count = 0
    for _dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        count += sum(1 for name in filenames if not name.startswith("."))
    return count


def _project_dir(root: Path, project: str) -> Path:
    """The project's folder, refusing bad names, symlinked folders and projects that do not exist."""
    validate_project_name(project)
    real_root = Path(root).resolve()
    folder = real_root / project
    if folder.is_symlink() or not folder.is_dir():
        raise VaultNotFound(f"project '{project}' does not exist in the vault")
    return folder


def is_markdown(path: str) -> bool:
    """True for the file names the vault indexes."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def document_title(text: str, path: str) -> str:
    """A document's title as the ingest pipeline gives it: front matter ``title``, first H1, file stem."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines and lines[0].rstrip() == "---":
        # The pipeline's parser does the same split; only the title is wanted here, not the chunks.
        for index in range(1, len(lines)):
            if lines[index].rstrip() in ("---", "..."):
                try:
                    data = yaml.safe_load("\n".join(lines[1:index]))
                except (yaml.YAMLError, ValueError, RecursionError):
                    data = None
                if isinstance(data, dict) and data.get("title") is not None and str(data["title"]).strip():
                    return " ".join(str(data["title"]).split())
                break
    for section in parse_sections(text):
        if section.level == 1 and section.title:
            return section.title
    return PurePosixPath(path).stem or path


def _head_title(path: Path, rel: str) -> str | None:
    try:
        with path.open("rb") as handle:
            head = handle.read(TITLE_HEAD_BYTES)
    except OSError:
        return None
    if b"\x00" in head:
        return None
    return document_title(head.decode("utf-8", "replace"), rel)


# --------------------------------------------------------------------------------------------------
# projects and folders


def list_projects(root: Path, principal: Principal) -> list[dict[str, Any]]:
    """The vault's projects the principal may see: ``name``, ``path``, ``file_count``, ``updated_at``, ``last_commit``."""
    real_root = Path(root).resolve()
    if not real_root.is_dir():
        return []
    repo = _repo(real_root)
    projects = []
    for entry in _visible_entries(real_root):
        if entry.is_symlink() or not entry.is_dir():
            continue
        try:
            validate_project_name(entry.name)
        except UnsafePath:
            continue
        if not principal.may_see(entry.name):
            continue
        folder = real_root / entry.name
        commit = CommitSummary.of(repo.last_commit(entry.name)) if repo else None
        projects.append(
            {
                "name": entry.name,
                "path": entry.name,
                "file_count": _count_files(folder),
                "updated_at": commit.date if commit else _mtime(folder),
                "last_commit": asdict(commit) if commit else None,
            }
        )
    return projects


def list_directory(root: Path, project: str, path: str = "") -> dict[str, Any]:
    """One level of a project folder: sub-folders with file counts, files with size, title and last commit.

    ``path`` is a folder inside the project ("" for its top). Raises :class:`UnsafePath` for a refused
    path and :class:`VaultNotFound` when the project or folder does not exist.
    """
    project_dir = _project_dir(root, project)
    rel = path.strip("/")
    folder = resolve_vault_path(root, project, rel) if rel else project_dir
    if not folder.is_dir():
        raise VaultNotFound(f"no folder '{rel}' in project '{project}'")
    real_project = project_dir.resolve()
    repo = _repo(Path(root).resolve())
    prefix = f"{project}/{rel}" if rel else project
    commits: dict[str, CommitInfo] = {}
    if repo is not None:
        try:
            commits = repo.last_commits(prefix)
        except GitError:
            commits = {}  # metadata is a nicety: a listing must not fail because git log did
    entries = _visible_entries(folder)
    truncated = len(entries) > MAX_LISTING_ENTRIES
    directories: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for entry in entries[:MAX_LISTING_ENTRIES]:
        full = folder / entry.name
        child_rel = f"{rel}/{entry.name}" if rel else entry.name
        try:
            real = full.resolve()
            if not real.is_relative_to(real_project):
                continue  # a symlink out of the project is not part of it
            info = real.stat()
        except OSError:
            continue
        vault_path = f"{project}/{child_rel}"
        if stat.S_ISDIR(info.st_mode):
            inside = [c for p, c in commits.items() if p.startswith(vault_path + "/")]
            latest = max(inside, key=lambda c: c.date, default=None)
            directories.append(
                {
                    "name": entry.name,
                    "path": child_rel,
                    "file_count": _count_files(real),
                    "updated_at": latest.date.isoformat() if latest else _mtime(real),
                }
            )
        elif stat.S_ISREG(info.st_mode):
            commit = CommitSummary.of(commits.get(vault_path))
            files.append(
                {
                    "name": entry.name,
                    "path": child_rel,
                    "size": info.st_size,
                    "title": _head_title(real, child_rel) if is_markdown(entry.name) else None,
                    "updated_at": commit.date if commit else _mtime(real),
                    "last_commit": asdict(commit) if commit else None,
                }
            )
    return {"project": project, "path": rel, "directories": directories, "files": files, "truncated": truncated}


# --------------------------------------------------------------------------------------------------
# one file


def read_file(root: Path, project: str, path: str, *, max_bytes: int) -> dict[str, Any]:
    """A vault file as text with its sections, size, last commit and an ETag.

    Raises :class:`UnsafePath` (refused path), :class:`VaultNotFound` (no such project or file) or
    :class:`VaultFileRefused` (too large: 413; binary or not UTF-8: 415).
    """
    _project_dir(root, project)
    full = resolve_vault_path(root, project, path)
    try:
        info = full.stat()
    except OSError:
        raise VaultNotFound(f"no file '{path}' in project '{project}'") from None
    if not stat.S_ISREG(info.st_mode):
        raise VaultNotFound(f"no file '{path}' in project '{project}'")
    if info.st_size > max_bytes:
        raise VaultFileRefused(f"'{path}' is {info.st_size} bytes, over the {max_bytes}-byte limit for reading", 413)
    with full.open("rb") as handle:
        data = handle.read(max_bytes + 1)  # bounded even if the file grew since stat()
    if len(data) > max_bytes:
        raise VaultFileRefused(f"'{path}' is over the {max_bytes}-byte limit for reading", 413)
    if b"\x00" in data:
        raise VaultFileRefused(f"'{path}' is a binary file, not text", 415)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise VaultFileRefused(f"'{path}' is not valid UTF-8 (byte {exc.start})", 415) from None
    repo = _repo(Path(root).resolve())
    commit: CommitSummary | None = None
    if repo is not None:
        try:
            commit = CommitSummary.of(repo.last_commit(f"{project}/{path}"))
        except GitError:
            commit = None
    markdown = is_markdown(path)
    sections = parse_sections(text) if markdown else []
    content_sha = hashlib.sha256(data).hexdigest()
    return {
        "project": project,
        "path": path,
        "title": document_title(text, path) if markdown else PurePosixPath(path).name,
        "size": len(data),
        "updated_at": commit.date if commit else _mtime(full),
        "last_commit": asdict(commit) if commit else None,
        "content_sha": content_sha,
        "content": text,
        "sections": [{**asdict(s), "highlighted": False} for s in sections],
        "highlight": None,
    }


def etag_for(file: dict[str, Any], highlight: str | None = None) -> str:
    """A strong ETag over what the response shows: the bytes, the last commit and the highlighted chunk."""
    commit = (file.get("last_commit") or {}).get("sha", "")
    seed = f"{file['content_sha']}\0{commit}\0{highlight or ''}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def locate_chunk(session: Session, principal: Principal, chunk_id: str) -> ChunkLocation | None:
    """The chunk's document and line range, or None when it does not exist or its project is hidden."""
    row = session.execute(
        select(ChunkRow.id, Project.name, ChunkRow.source, ChunkRow.start_line, ChunkRow.end_line, ChunkRow.anchor,
               Document.content_sha)
        .join(Project, ChunkRow.project_id == Project.id)
        .join(Document, ChunkRow.document_id == Document.id)
        .where(ChunkRow.id == chunk_id)
    ).first()
    if row is None or not principal.may_see(row.name):
        return None
    return ChunkLocation(row.id, row.name, row.source, row.start_line, row.end_line, row.anchor, row.content_sha)


def highlight_index(sections: list[Section] | list[dict[str, Any]], line: int) -> int | None:
    """The index of the section holding 1-based ``line``: the last one starting at or before it.

    Blank lines between sections belong to the section above; a line in the front matter (before every
    section) maps to the first section.
    """
    if not sections:
        return None
    starts = [s["start_line"] if isinstance(s, dict) else s.start_line for s in sections]
    best = 0
    for index, start in enumerate(starts):
        if start <= line:
            best = index
    return best


def apply_highlight(file: dict[str, Any], location: ChunkLocation) -> dict[str, Any]:
    """Mark the section the chunk came from and return it with its neighbours under ``highlight``.

    The chunk's ``anchor`` names its section exactly (a heading with no body folds into the next section's
    chunk, so the chunk's first line can lie in the section above); line numbers are the fallback, for
    chunks without an anchor (the document's L0 chunk) or whose section was renamed since indexing.
    """
    sections = file["sections"]
    by_anchor = [i for i, s in enumerate(sections) if location.anchor and s["anchor"] == location.anchor]
    index = by_anchor[0] if by_anchor else highlight_index(sections, location.start_line)
    for position, section in enumerate(sections):
        section["highlighted"] = position == index
    file["highlight"] = {
        "chunk_id": location.chunk_id,
        "section_index": index,
        "anchor": sections[index]["anchor"] if index is not None else None,
        "chunk_start_line": location.start_line,
        "chunk_end_line": location.end_line,
        # The chunk's lines refer to the document as ingested; say so when the file changed since.
        "stale": location.content_sha != file["content_sha"],
        "sections": [] if index is None else sections[max(0, index - 1) : index + 2],
    }
    return file
