"""Edit the vault through review (GRC): a change becomes a branch, a commit and a pull request on the forge.

Nothing here touches the local working copy: the forge's REST API commits the change on a new branch
(``edit/<user>/<slug>-<timestamp>``) and opens the pull request; the merge comes back as a webhook and the
sync indexes it. ``base_commit`` guards against lost updates: when the document differs between that
commit and the default branch (content, or existence), the draft is refused with the current commit and
nothing is created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.config import Settings
from shared.db.models import VaultEvent
from shared.forge.client import (
    FileChange,
    FileContent,
    ForgejoClient,
    ForgejoConflict,
    ForgejoError,
    ForgejoNotFound,
    ForgejoValidationError,
    Identity,
)
from shared.identity.principal import Principal
from shared.vault.markdown import slugify
from shared.vault.paths import UnsafePath, resolve_vault_path

COMMITTER = Identity("poimen-memory", "poimen-memory@localhost")
MAX_SLUG_CHARS = 40
MAX_USER_CHARS = 40
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")
_EMAIL = re.compile(r"[^@\s<>]+@[^@\s<>]+")


class ForgeNotConfigured(RuntimeError):
    """GRC needs ``MEM_FORGEJO_URL``, ``MEM_FORGEJO_TOKEN`` and ``MEM_FORGEJO_REPO``."""


class DraftRefused(ValueError):
    """The draft cannot be made as asked (``status`` is the HTTP status; ``str(exc)`` is safe to show)."""

    def __init__(self, message: str, status: int = 422, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


@dataclass(frozen=True)
class DraftResult:
    """What :func:`create_draft` made."""

    branch: str
    pr_number: int
    pr_url: str | None
    commit: str
    operation: str  # create | update | delete

    def to_dict(self) -> dict[str, Any]:
        """The API answer."""
        return {"branch": self.branch, "pr_number": self.pr_number, "pr_url": self.pr_url,
                "commit": self.commit, "operation": self.operation}


def forge_client(settings: Settings, *, timeout: float = 10.0) -> ForgejoClient:
    """The Forgejo client for the vault repository, or :class:`ForgeNotConfigured`."""
    missing = [name for name, value in (("MEM_FORGEJO_URL", settings.forgejo_url),
                                        ("MEM_FORGEJO_TOKEN", settings.forgejo_token),
                                        ("MEM_FORGEJO_REPO", settings.forgejo_repo)) if not value]
    if missing:
        raise ForgeNotConfigured(f"editing through review needs {', '.join(missing)} to be set")
    assert settings.forgejo_url and settings.forgejo_repo
    return ForgejoClient(settings.forgejo_url, settings.forgejo_token, settings.forgejo_repo, timeout=timeout)


def forge_configured(settings: Settings) -> bool:
    """True when the forge client can be built."""
    return bool(settings.forgejo_url and settings.forgejo_token and settings.forgejo_repo)


def split_document_path(root: Path, document_path: str) -> tuple[str, str]:
    """``"project/inside/path.md"`` -> ``(project, "inside/path.md")``, refusing every unsafe path."""
    if not isinstance(document_path, str) or "/" not in document_path.strip("/"):
        raise UnsafePath("document_path must be '<project>/<path inside the project>'")
    project, _, inside = document_path.partition("/")
    resolve_vault_path(root, project, inside)  # raises UnsafePath; the file need not exist
    if not inside.lower().endswith((".md", ".markdown")):
        raise UnsafePath("document_path must name a markdown file (.md or .markdown)")
    return project, inside


def user_slug(principal: Principal) -> str:
    """A branch-safe name for the principal (``api_key:ab12`` -> ``api-key-ab12``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", principal.subject.lower()).strip("-")[:MAX_USER_CHARS].strip("-")
    return slug or "user"


def author_of(principal: Principal) -> Identity:
    """The commit author for a principal: its name, and its e-mail claim when it has a usable one."""
    email = principal.claims.get("email") if principal.claims else None
    if not isinstance(email, str) or not _EMAIL.fullmatch(email):
        email = f"{user_slug(principal)}@users.poimen-memory.invalid"
    name = re.sub(r"[<>\n\r\x00]", "", principal.name).strip() or user_slug(principal)
    return Identity(name[:200], email)


def draft_branch(principal: Principal, inside_path: str, now: datetime | None = None) -> str:
    """``edit/<user>/<slug>-<timestamp>`` for a draft of ``inside_path``."""
    moment = (now or datetime.now(UTC)).strftime("%Y%m%d%H%M%S")
    slug = re.sub(r"[^a-z0-9-]+", "-", slugify(PurePosixPath(inside_path).stem)).strip("-")[:MAX_SLUG_CHARS]
    return f"edit/{user_slug(principal)}/{(slug or 'document').strip('-')}-{moment}"


def _file_or_none(client: ForgejoClient, path: str, ref: str) -> FileContent | None:
    try:
        return client.get_file(path, ref=ref)
    except ForgejoNotFound:
        return None


def create_draft(
    client: ForgejoClient,
    principal: Principal,
    *,
    project: str,
    inside_path: str,
    content: str | None,
    message: str,
    base_commit: str | None = None,
    max_bytes: int,
) -> DraftResult:
    """Propose a change of one document (``content=None`` deletes it) as a pull request.

    Raises :class:`DraftRefused` for a stale ``base_commit`` (409, with ``current_commit``), a deletion of
    a missing file (404), a change that changes nothing or a document over ``max_bytes`` (422), and
    :class:`shared.forge.ForgejoError` when the forge fails.
    """
    vault_path = f"{project}/{inside_path}"
    encoded = content.encode("utf-8") if content is not None else None
    if encoded is not None and len(encoded) > max_bytes:
        raise DraftRefused(f"content is {len(encoded)} bytes, over the {max_bytes}-byte limit", 413)
    if base_commit is not None and not _SHA.fullmatch(base_commit):
        raise DraftRefused("base_commit must be a commit id (7 to 64 hex digits)", 400)
    default = client.default_branch()
    current = _file_or_none(client, vault_path, default)
    if base_commit is not None:
        base = _file_or_none(client, vault_path, base_commit)
        if (base is None) != (current is None) or (base and current and base.sha != current.sha):
            head = current.last_commit_sha if current and current.last_commit_sha else client.get_branch(default).commit_sha
            raise DraftRefused(
                f"{vault_path} changed since {base_commit[:12]}: rebase the edit on the current version",
                409,
                current_commit=head,
            )
    if encoded is None:
        if current is None:
            raise DraftRefused(f"{vault_path} does not exist, so it cannot be deleted", 404)
        change = FileChange("delete", vault_path, sha=current.sha)
    elif current is None:
        change = FileChange("create", vault_path, content=encoded)
    elif current.content == encoded:
        raise DraftRefused(f"the draft does not change {vault_path}", 422)
    else:
        change = FileChange("update", vault_path, content=encoded, sha=current.sha)

    author = author_of(principal)
    title = message.strip().splitlines()[0][:200] if message.strip() else f"Edit {vault_path}"
    branch = draft_branch(principal, inside_path)
    for attempt in range(2):
        candidate = branch if attempt == 0 else f"{branch}-2"
        try:
            result = client.change_files(
                [change], message.strip() or title, branch=default, new_branch=candidate,
                author=author, committer=COMMITTER,
            )
            branch = candidate
            break
        except (ForgejoValidationError, ForgejoConflict) as exc:
            # Two drafts of one document by one user in the same second: the branch name is taken.
            if attempt == 1 or "exist" not in str(exc).lower():
                raise
    body = (
        f"Proposed by {author.name} (`{principal.subject}`) through poimen-memory.\n\n"
        f"{change.operation.capitalize()} `{vault_path}`."
    )
    pull = client.create_pull_request(title, head=branch, base=default, body=body)
    return DraftResult(branch, pull.number, pull.html_url, result.commit_sha, change.operation)


def record_draft(session: Session, principal: Principal, project: str, inside_path: str, draft: DraftResult) -> None:
    """Remember which project a pull request edits, so its status is shown only to those who may see it."""
    session.add(
        VaultEvent(
            kind="draft",
            project=project,
            commit=draft.commit,
            detail={"pr_number": draft.pr_number, "branch": draft.branch, "path": inside_path,
                    "operation": draft.operation, "author": principal.subject},
            handled=True,
        )
    )


def draft_project(session: Session, pr_number: int) -> str | None:
    """The project a draft pull request edits, when this service opened it."""
    return session.scalars(
        select(VaultEvent.project)
        .where(VaultEvent.kind == "draft", VaultEvent.detail["pr_number"].as_integer() == pr_number)
        .order_by(VaultEvent.id.desc())
        .limit(1)
    ).first()


def draft_status(client: ForgejoClient, pr_number: int) -> dict[str, Any]:
    """A pull request's state (open / merged / closed), mergeability, merge time and combined CI status."""
    pull = client.get_pull_request(pr_number)
    raw = pull.raw
    head = raw.get("head") if isinstance(raw.get("head"), dict) else {}
    ref = str(head.get("sha") or pull.head_ref or "")
    ci: dict[str, Any] = {"state": "unknown", "statuses": []}
    if ref:
        try:
            combined = client.combined_status(ref)
            ci = {
                "state": combined.state or "none",
                "statuses": [
                    {"context": s.context, "status": s.status, "target_url": s.target_url, "description": s.description}
                    for s in combined.statuses
                ],
            }
        except ForgejoNotFound:
            pass  # the head branch was deleted after the merge: no CI to report
    mergeable = raw.get("mergeable")
    return {
        "pr_number": pull.number,
        "state": "merged" if pull.merged else ("open" if pull.state == "open" else "closed"),
        "title": pull.title,
        "branch": pull.head_ref,
        "base": pull.base_ref,
        "pr_url": pull.html_url,
        "mergeable": mergeable if isinstance(mergeable, bool) else None,
        "merged_at": raw.get("merged_at"),
        "merge_commit": pull.merge_commit_sha,
        "ci": ci,
    }


__all__ = [
    "DraftRefused",
    "DraftResult",
    "ForgeNotConfigured",
    "ForgejoError",
    "create_draft",
    "draft_project",
    "draft_status",
    "forge_client",
    "record_draft",
    "split_document_path",
]
