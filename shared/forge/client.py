"""A small client for the Forgejo (and Gitea) REST API v1: branches, files, pull requests, statuses.

Only the endpoints the vault needs. Every request is checked in the tests against Forgejo's
published Swagger description by a stand-in server, so paths, methods and body fields match it.

Retries: idempotent methods (GET, HEAD, PUT, DELETE) are retried with backoff on connection
errors, read errors and 5xx answers. POST is retried only when the connection could not be
opened, i.e. before a byte of the request reached the server: a POST that did arrive may already
have created a branch, a commit or a pull request, and repeating it would make a duplicate (or a
confusing 409/422) instead of reporting what happened.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

API_PREFIX = "/api/v1"
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
RETRY_STATUSES = (500, 502, 503, 504)
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

FileOperation = Literal["create", "update", "delete"]


class ForgejoError(Exception):
    """The forge refused or failed a request. ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, *, status: int | None = None, method: str = "", path: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.method = method
        self.path = path


class ForgejoUnavailable(ForgejoError):
    """No usable answer: connection refused, timeout, or a 5xx after the retries."""


class ForgejoUnauthorized(ForgejoError):
    """401: the token is missing, wrong or expired."""


class ForgejoForbidden(ForgejoError):
    """403: the token lacks the permission (or the branch is protected)."""


class ForgejoNotFound(ForgejoError):
    """404: repository, branch, file or pull request does not exist (or is hidden from the token)."""


class ForgejoConflict(ForgejoError):
    """409: the thing already exists (branch, open pull request) or the state moved on."""


class ForgejoValidationError(ForgejoError):
    """422: the forge rejected the request body (e.g. a file sha that no longer matches)."""


_ERRORS_BY_STATUS: dict[int, type[ForgejoError]] = {
    401: ForgejoUnauthorized,
    403: ForgejoForbidden,
    404: ForgejoNotFound,
    409: ForgejoConflict,
    422: ForgejoValidationError,
}


@dataclass(frozen=True)
class Identity:
    """A commit author or committer."""

    name: str
    email: str


@dataclass(frozen=True)
class Branch:
    """A branch and the commit it points at."""

    name: str
    commit_sha: str
    protected: bool = False


@dataclass(frozen=True)
class FileContent:
    """A file read through the API. ``sha`` is the blob id needed to update or delete it."""

    path: str
    sha: str
    content: bytes
    last_commit_sha: str | None = None


@dataclass(frozen=True)
class FileChange:
    """One operation of :meth:`ForgejoClient.change_files`.

    ``create`` and ``update`` need ``content``; ``update`` and ``delete`` need the current blob
    ``sha`` (from :meth:`ForgejoClient.get_file`), which is how the forge detects lost updates.
    ``from_path`` renames the file as part of an update.
    """

    operation: FileOperation
    path: str
    content: bytes | None = None
    sha: str | None = None
    from_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``ChangeFileOperation`` body, validated locally first."""
        if self.operation not in ("create", "update", "delete"):
            raise ValueError(f"unknown file operation {self.operation!r}")
        if not self.path:
            raise ValueError("file change needs a path")
        if self.operation in ("create", "update") and self.content is None:
            raise ValueError(f"{self.operation} of {self.path} needs content")
        if self.operation in ("update", "delete") and not self.sha:
            raise ValueError(f"{self.operation} of {self.path} needs the current file sha")
        body: dict[str, Any] = {"operation": self.operation, "path": self.path}
        if self.content is not None:
            body["content"] = base64.b64encode(self.content).decode("ascii")
        if self.sha:
            body["sha"] = self.sha
        if self.from_path:
            body["from_path"] = self.from_path
        return body


@dataclass(frozen=True)
class ChangeResult:
    """The commit made by :meth:`ForgejoClient.change_files`."""

    commit_sha: str
    html_url: str | None
    files: dict[str, str | None]  # path -> new blob sha (None for deleted files)


@dataclass(frozen=True)
class PullRequest:
    """The fields of a pull request the vault cares about."""

    number: int
    state: str  # "open" | "closed"
    merged: bool
    title: str
    head_ref: str
    base_ref: str
    html_url: str | None
    merge_commit_sha: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class CommitStatus:
    """One CI status on a commit."""

    context: str
    status: str  # pending | success | error | failure | warning
    target_url: str | None
    description: str | None


@dataclass(frozen=True)
class CombinedStatus:
    """The combined CI state of a commit (``state`` is ``""`` when nothing has reported yet)."""

    sha: str
    state: str
    statuses: list[CommitStatus]


def _retry_policy(retries: int, backoff: float) -> Retry:
    """urllib3's Retry: see the module docstring for which requests are retried and why."""
    return Retry(
        total=retries,
        connect=retries,  # urllib3 retries connect errors for every method: nothing was sent
        read=retries,
        status=retries,
        other=0,
        allowed_methods=IDEMPOTENT_METHODS,  # read errors and 5xx: idempotent methods only
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff,
        backoff_max=10,
        respect_retry_after_header=True,
        raise_on_status=False,  # hand the last 5xx to us so the error carries its message
    )


class ForgejoClient:
    """Talks to one repository (``"owner/name"``) on a Forgejo or Gitea server.

    ``base_url`` is the server root (``https://forge.example``) or the API root
    (``https://forge.example/api/v1``). ``token`` is sent as ``Authorization: token <token>``
    and never appears in error messages. ``session`` lets callers share a connection pool; the
    retry adapter is mounted on it for this server's URLs only.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        repo: str,
        *,
        timeout: float = 10,
        retries: int = 3,
        session: requests.Session | None = None,
        backoff: float = 0.5,
    ) -> None:
        owner, sep, name = repo.partition("/")
        if not sep or not owner or not name or "/" in name:
            raise ValueError(f"repo must be 'owner/name', got {repo!r}")
        root = base_url.rstrip("/")
        if not root.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        self.api_url = root if root.endswith(API_PREFIX) else root + API_PREFIX
        self.owner, self.name = owner, name
        self.timeout = timeout
        self._token = token
        self._session = session or requests.Session()
        adapter = HTTPAdapter(max_retries=_retry_policy(retries, backoff))
        self._session.mount(self.api_url + "/", adapter)

    def close(self) -> None:
        """Close the connection pool."""
        self._session.close()

    def __enter__(self) -> ForgejoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ----------------------------------------------------------------------------

    def _repo_path(self, *parts: str) -> str:
        base = f"/repos/{quote(self.owner, safe='')}/{quote(self.name, safe='')}"
        return base + "".join("/" + p for p in parts)

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON (None for an empty body) or raise ForgejoError."""
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"token {self._token}"
        try:
            response = self._session.request(
                method,
                self.api_url + path,
                params=params,
                json=body,
                headers=headers,
                timeout=self.timeout,
                stream=True,  # so an oversized answer is refused before it is all in memory
            )
        except requests.RequestException as exc:
            raise ForgejoUnavailable(
                f"{method} {path}: forge unreachable ({type(exc).__name__})", method=method, path=path
            ) from None
        with response:
            payload = self._read_body(response, method, path)
        if response.status_code >= 400:
            raise self._error(response.status_code, payload, method, path)
        return payload

    @staticmethod
    def _read_body(response: requests.Response, method: str, path: str) -> Any:
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(65536):
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise ForgejoError(
                        f"{method} {path}: answer larger than {MAX_RESPONSE_BYTES} bytes",
                        status=response.status_code, method=method, path=path,
                    )
                chunks.append(chunk)
        except requests.RequestException as exc:
            raise ForgejoUnavailable(
                f"{method} {path}: connection broke while reading ({type(exc).__name__})",
                status=response.status_code, method=method, path=path,
            ) from None
        raw = b"".join(chunks)
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            if response.status_code >= 400:
                return {"message": raw[:200].decode("utf-8", "replace")}
            raise ForgejoError(
                f"{method} {path}: answer is not JSON", status=response.status_code, method=method, path=path
            ) from None

    @staticmethod
    def _error(status: int, payload: Any, method: str, path: str) -> ForgejoError:
        message = ""
        if isinstance(payload, dict):
            message = str(payload.get("message") or payload.get("errors") or "")
        text = f"{method} {path}: HTTP {status}" + (f": {message[:300]}" if message else "")
        if status >= 500:
            return ForgejoUnavailable(text, status=status, method=method, path=path)
        cls = _ERRORS_BY_STATUS.get(status, ForgejoError)
        return cls(text, status=status, method=method, path=path)

    @staticmethod
    def _expect_object(payload: Any, what: str) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise ForgejoError(f"unexpected answer for {what}: not a JSON object")
        return payload

    # --- repository and branches -------------------------------------------------------------

    def repo_info(self) -> dict[str, Any]:
        """The repository object (``GET /repos/{owner}/{repo}``)."""
        return self._expect_object(self._request("GET", self._repo_path()), "repository")

    def default_branch(self) -> str:
        """The repository's default branch name."""
        branch = self.repo_info().get("default_branch")
        if not isinstance(branch, str) or not branch:
            raise ForgejoError("repository has no default branch (is it empty?)")
        return branch

    def get_branch(self, name: str) -> Branch:
        """One branch (``GET /repos/{owner}/{repo}/branches/{branch}``); ForgejoNotFound if absent."""
        payload = self._request("GET", self._repo_path("branches", quote(name, safe="")))
        return _branch(self._expect_object(payload, "branch"))

    def create_branch(self, name: str, from_ref: str) -> Branch:
        """Create branch ``name`` at ``from_ref`` (a branch, tag or commit); ForgejoConflict if it exists."""
        body = {"new_branch_name": name, "old_ref_name": from_ref}
        payload = self._request("POST", self._repo_path("branches"), body=body)
        return _branch(self._expect_object(payload, "branch"))

    # --- files -------------------------------------------------------------------------------

    def get_file(self, path: str, ref: str | None = None) -> FileContent:
        """A file's bytes and blob sha at ``ref`` (default branch when None)."""
        params = {"ref": ref} if ref else None
        payload = self._expect_object(
            self._request("GET", self._repo_path("contents", quote(path.lstrip("/"), safe="/")), params=params),
            "file",
        )
        if payload.get("type") != "file":
            raise ForgejoError(f"{path} is a {payload.get('type') or 'non-file'}, not a file")
        encoded = payload.get("content") or ""
        try:
            content = base64.b64decode(encoded, validate=False) if payload.get("encoding") == "base64" else encoded.encode()
        except ValueError:
            raise ForgejoError(f"{path}: content is not valid base64") from None
        return FileContent(
            path=str(payload.get("path") or path),
            sha=str(payload.get("sha") or ""),
            content=content,
            last_commit_sha=payload.get("last_commit_sha"),
        )

    def change_files(
        self,
        changes: Sequence[FileChange],
        message: str,
        *,
        branch: str | None = None,
        new_branch: str | None = None,
        author: Identity | None = None,
        committer: Identity | None = None,
    ) -> ChangeResult:
        """Create, update and delete several files in ONE commit (``POST /repos/{owner}/{repo}/contents``).

        ``branch`` is the base (default branch when None); ``new_branch`` creates that branch from it
        and commits there, which is how a change is proposed for review.
        """
        if not changes:
            raise ValueError("change_files needs at least one change")
        body: dict[str, Any] = {"files": [c.to_json() for c in changes], "message": message}
        if branch:
            body["branch"] = branch
        if new_branch:
            body["new_branch"] = new_branch
        if author:
            body["author"] = {"name": author.name, "email": author.email}
        if committer:
            body["committer"] = {"name": committer.name, "email": committer.email}
        payload = self._expect_object(self._request("POST", self._repo_path("contents"), body=body), "commit")
        commit = payload.get("commit") or {}
        sha = commit.get("sha") if isinstance(commit, dict) else None
        if not isinstance(sha, str) or not sha:
            raise ForgejoError("forge did not report the new commit")
        files: dict[str, str | None] = {}
        for change, entry in zip(changes, payload.get("files") or [], strict=False):
            files[change.path] = entry.get("sha") if isinstance(entry, dict) else None
        return ChangeResult(commit_sha=sha, html_url=commit.get("html_url"), files=files)

    # --- pull requests and statuses ----------------------------------------------------------

    def create_pull_request(self, title: str, head: str, base: str, body: str = "") -> PullRequest:
        """Open a pull request from branch ``head`` into ``base``; ForgejoConflict if one is already open."""
        payload = self._request(
            "POST", self._repo_path("pulls"), body={"title": title, "head": head, "base": base, "body": body}
        )
        return _pull_request(self._expect_object(payload, "pull request"))

    def get_pull_request(self, number: int) -> PullRequest:
        """A pull request by number; ForgejoNotFound if absent."""
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError("pull request number must be a positive integer")
        payload = self._request("GET", self._repo_path("pulls", str(number)))
        return _pull_request(self._expect_object(payload, "pull request"))

    def combined_status(self, ref: str) -> CombinedStatus:
        """The combined CI status of a commit, branch or tag."""
        payload = self._expect_object(
            self._request("GET", self._repo_path("commits", quote(ref, safe=""), "status")), "status"
        )
        statuses = [
            CommitStatus(
                context=str(s.get("context") or ""),
                status=str(s.get("status") or ""),
                target_url=s.get("target_url"),
                description=s.get("description"),
            )
            for s in payload.get("statuses") or []
            if isinstance(s, dict)
        ]
        return CombinedStatus(sha=str(payload.get("sha") or ""), state=str(payload.get("state") or ""), statuses=statuses)


def _branch(payload: dict[str, Any]) -> Branch:
    commit = payload.get("commit") or {}
    return Branch(
        name=str(payload.get("name") or ""),
        commit_sha=str(commit.get("id") or "") if isinstance(commit, dict) else "",
        protected=bool(payload.get("protected")),
    )


def _pull_request(payload: dict[str, Any]) -> PullRequest:
    head = payload.get("head") if isinstance(payload.get("head"), dict) else {}
    base = payload.get("base") if isinstance(payload.get("base"), dict) else {}
    number = payload.get("number")
    if not isinstance(number, int):
        raise ForgejoError("pull request answer has no number")
    return PullRequest(
        number=number,
        state=str(payload.get("state") or ""),
        merged=bool(payload.get("merged")),
        title=str(payload.get("title") or ""),
        head_ref=str(head.get("ref") or ""),
        base_ref=str(base.get("ref") or ""),
        html_url=payload.get("html_url"),
        merge_commit_sha=payload.get("merge_commit_sha"),
        raw=payload,
    )
