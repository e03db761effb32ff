"""Where documents come from: inline in a request, a directory on the server, a git repository, or named
files of the vault working copy (what a vault sync found changed).

Every file passes the same gate (:func:`decode_markdown`): size limit, no binary content, UTF-8. A file that
fails is skipped with a readable reason recorded on the job; it never fails the whole ingest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MARKDOWN_SUFFIXES = (".md", ".markdown")


class SourceError(ValueError):
    """The source as a whole cannot be read (missing directory, clone failed)."""


class BadDocument(ValueError):
    """One document cannot be ingested; the message says why."""


@dataclass(frozen=True)
class SourceFile:
    """A markdown file found in a source: its path inside the project and its raw bytes."""

    path: str
    data: bytes


@dataclass(frozen=True)
class Skipped:
    """A file that was not ingested, and why."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """JSON shape stored in the job result."""
        return {"path": self.path, "reason": self.reason}


def check_document_path(path: str) -> str:
    """Validate a document path from a request: relative, POSIX, no ``..``, no dotfiles, markdown suffix."""
    if not path or not isinstance(path, str):
        raise BadDocument("document path is empty")
    if "\x00" in path or "\\" in path or any(ord(c) < 32 for c in path):
        raise BadDocument(f"document path {path!r} contains a NUL, control character or backslash")
    if "%" in path:
        raise BadDocument(f"document path {path!r} contains a percent sign; send paths decoded")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise BadDocument(f"document path {path!r} must be relative to the project folder")
    parts = pure.parts
    if any(part in ("..", ".") for part in parts):
        raise BadDocument(f"document path {path!r} may not contain '.' or '..' segments")
    if any(part.startswith(".") for part in parts):
        raise BadDocument(f"document path {path!r} may not name a dotfile or dot-directory")
    if not pure.name.lower().endswith(MARKDOWN_SUFFIXES):
        raise BadDocument(f"document path {path!r} is not a markdown file (.md or .markdown)")
    if len(path) > 1024:
        raise BadDocument("document path is longer than 1024 characters")
    return pure.as_posix()


def decode_markdown(data: bytes, max_bytes: int) -> str:
    """Turn raw bytes into markdown text, or raise :class:`BadDocument` with the reason."""
    if len(data) > max_bytes:
        raise BadDocument(f"file is {len(data)} bytes, over the {max_bytes}-byte limit")
    if b"\x00" in data[:8192]:
        raise BadDocument("file looks binary (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadDocument(f"file is not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise BadDocument("file is empty")
    return text


def oversize_reason(size: int, max_bytes: int) -> str:
    """The skip reason of a file over the size limit (the same words :func:`decode_markdown` uses)."""
    return f"file is {size} bytes, over the {max_bytes}-byte limit"


def collect_directory(root: Path, max_bytes: int | None = None) -> tuple[list[SourceFile], list[Skipped]]:
    """All markdown files under ``root`` (any depth), skipping dot-directories and links that leave it.

    With ``max_bytes``, a larger file is skipped on its size alone, without reading it into memory.
    """
    root = root.resolve()
    if not root.is_dir():
        raise SourceError(f"directory {root.name!r} does not exist on the server")
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not name.lower().endswith(MARKDOWN_SUFFIXES):
                continue
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            try:
                real = full.resolve()
                if root not in real.parents:
                    skipped.append(Skipped(rel, "symlink points outside the source directory"))
                    continue
                if max_bytes is not None and (size := real.stat().st_size) > max_bytes:
                    skipped.append(Skipped(rel, oversize_reason(size, max_bytes)))
                    continue
                files.append(SourceFile(rel, real.read_bytes()))
            except OSError as exc:
                skipped.append(Skipped(rel, f"unreadable: {exc.strerror or exc}"))
    return files, skipped


def collect_vault_files(
    project_dir: Path, paths: Iterable[str], max_bytes: int
) -> tuple[list[SourceFile], list[Skipped]]:
    """The named files of one project folder of the vault working copy (a sync's changed paths).

    Each path is checked like a request's document path, must stay inside ``project_dir`` after
    symlinks are resolved, and is skipped (with the reason) when missing, not a regular file or
    larger than ``max_bytes``; a file over the limit is never read into memory.
    """
    real_dir = project_dir.resolve()
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    for raw in paths:
        try:
            rel = check_document_path(str(raw))
        except BadDocument as exc:
            skipped.append(Skipped(str(raw), str(exc)))
            continue
        full = project_dir / rel
        try:
            real = full.resolve()
            if real_dir not in real.parents:
                skipped.append(Skipped(rel, "symlink points outside the project folder"))
                continue
            if not real.is_file():
                skipped.append(Skipped(rel, "not a regular file in the vault working copy"))
                continue
            size = real.stat().st_size
            if size > max_bytes:
                skipped.append(Skipped(rel, oversize_reason(size, max_bytes)))
                continue
            files.append(SourceFile(rel, real.read_bytes()))
        except OSError as exc:
            skipped.append(Skipped(rel, f"unreadable: {exc.strerror or exc}"))
    return files, skipped


def collect_inline(documents: Iterable[dict[str, object]]) -> tuple[list[SourceFile], list[Skipped]]:
    """Documents sent in a request body (already validated by the API)."""
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    for doc in documents:
        path = str(doc.get("path", ""))
        try:
            files.append(SourceFile(check_document_path(path), str(doc.get("content", "")).encode("utf-8")))
        except BadDocument as exc:
            skipped.append(Skipped(path, str(exc)))
    return files, skipped


def clone_repository(url: str, ref: str, dest: Path, timeout: float = 300.0) -> Path:
    """Shallow-clone ``url`` at ``ref`` into ``dest`` (replacing an older clone) and return it."""
    # Only network remotes: a file:// or local path would let a caller read any repository on the server.
    if not (url.startswith("https://") or url.startswith("http://")):
        raise SourceError("git url must start with http:// or https://")
    if ref.startswith("-"):
        raise SourceError("git ref may not start with '-'")
    tmp = dest.with_name(dest.name + ".cloning")
    shutil.rmtree(tmp, ignore_errors=True)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        subprocess.run(
            ["git", "clone", "--quiet", "--depth", "1", "--branch", ref, "--", url, str(tmp)],
            check=True,
            capture_output=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode(errors="replace").strip().splitlines()
        raise SourceError(f"git clone failed: {message[-1] if message else 'unknown error'}") from None
    except subprocess.TimeoutExpired:
        raise SourceError(f"git clone timed out after {timeout:.0f}s") from None
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest
