"""The vault's git working copy, driven through the real ``git`` command line.

We shell out to the ``git`` CLI instead of using a binding (pygit2, dulwich, GitPython's object
layer): the CLI is the reference implementation, and it already honours every transport,
credential helper, SSH config, proxy and CA bundle the operator has set up. Every call runs with
a timeout (the whole process group is killed on expiry, so ``git-remote-https`` children cannot
hold the pipes open), with prompts disabled, and fails with :class:`GitError` whose message
carries a short summary of git's stderr with credentials scrubbed from URLs.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

DEFAULT_TIMEOUT_SECS = 120.0
MAX_STDERR_SUMMARY = 600
REMOTE = "origin"
# The empty tree: what "old" is when a vault is synced for the first time.
EMPTY_TREE_SHA1 = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*)(\S+\s+)?\S+")
_HEADER_START = re.compile(r"^\x1e([0-9a-f]{40}|[0-9a-f]{64})\x1f")

ChangeKind = Literal["added", "modified", "renamed", "deleted"]


class GitError(RuntimeError):
    """A git command failed, timed out or could not be started. The message is safe to show."""

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class GitObjectMissing(GitError):
    """The requested commit, or the file at that commit, does not exist."""


@dataclass(frozen=True)
class SyncOutcome:
    """What :meth:`GitRepo.sync_to_remote` did: ``forced`` is True when history was rewritten."""

    old_sha: str | None  # None when the working copy had no commit yet
    new_sha: str
    forced: bool

    @property
    def changed(self) -> bool:
        """True when the working copy moved."""
        return self.old_sha != self.new_sha


@dataclass(frozen=True)
class Change:
    """One file changed between two commits."""

    kind: ChangeKind
    path: str  # POSIX path relative to the repository root (the new path for renames)
    old_path: str | None = None  # set for renames only


@dataclass(frozen=True)
class CommitInfo:
    """The commit that last touched a file."""

    sha: str
    author: str
    date: datetime  # author date, timezone-aware
    message: str
    author_email: str = ""


def redact(text: str) -> str:
    """Remove credentials from URLs (``https://user:token@host``) and Authorization headers in ``text``."""
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + "***@", text)
    return _AUTH_HEADER.sub(lambda m: m.group(1) + "***", text)


def _summarise(stderr: bytes) -> str:
    """The last meaningful lines of git's stderr, credentials removed, bounded in length."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith("hint:")]
    summary = " | ".join(lines[-4:])
    if len(summary) > MAX_STDERR_SUMMARY:
        summary = "..." + summary[-MAX_STDERR_SUMMARY:]
    return redact(summary) or "no error output"


def _check_ref_name(name: str) -> str:
    """Refuse branch names git would reject or that could be read as an option."""
    if not name or name.startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/+-]+", name):
        raise GitError(f"invalid branch name: {name!r}")
    if ".." in name or name.endswith((".", "/", ".lock")) or "//" in name or name.startswith("/"):
        raise GitError(f"invalid branch name: {name!r}")
    return name


def _check_sha(sha: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha or ""):
        raise GitError(f"not a commit id: {sha!r}")
    return sha


def _check_identity(value: str, what: str) -> str:
    if not value or any(c in value for c in "<>\n\r\x00"):
        raise GitError(f"invalid {what}: must be non-empty and contain no '<', '>' or line breaks")
    return value


class GitRepo:
    """A git working copy at ``workdir`` with one remote, ``origin``.

    ``auth_header`` (e.g. ``"Authorization: token abc"``) is passed to git through
    ``GIT_CONFIG_*`` environment variables as ``http.extraHeader``, so it never appears in the
    process list, in ``.git/config`` or in error messages.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECS,
        auth_header: str | None = None,
        git_binary: str = "git",
    ) -> None:
        self.workdir = Path(workdir)
        self.timeout = timeout
        self._git = git_binary
        self._env = self._build_env(auth_header)

    @staticmethod
    def _build_env(auth_header: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "GIT_TERMINAL_PROMPT": "0",  # fail instead of waiting for a password on a TTY
                "GIT_ASKPASS": "",
                "SSH_ASKPASS": "",
                "LC_ALL": "C",  # stable, parseable messages
                "GIT_OPTIONAL_LOCKS": "0",
            }
        )
        config: list[tuple[str, str]] = []
        if auth_header:
            config.append(("http.extraHeader", auth_header))
        # Safe directory: the working copy may be owned by another uid inside a container.
        config.append(("safe.directory", "*"))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        return env

    # --- running git -------------------------------------------------------------------------

    def _run(
        self,
        *args: str,
        cwd: Path | None = None,
        ok_codes: Sequence[int] = (0,),
        timeout: float | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git <args>``; raise :class:`GitError` on timeout or an unexpected exit code."""
        limit = self.timeout if timeout is None else timeout
        env = self._env if not extra_env else {**self._env, **extra_env}
        command = [self._git, "--literal-pathspecs", *args]
        label = args[2] if args[:1] == ("-c",) else args[0]  # the subcommand, never its arguments
        try:
            proc = subprocess.Popen(
                command,
                cwd=cwd or self.workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # so a timeout can kill the transport helpers too
            )
        except OSError as exc:
            where = cwd or self.workdir
            if not where.is_dir():
                raise GitError(f"working copy folder {where} does not exist") from None
            raise GitError(f"cannot run git: {exc.strerror}") from None
        try:
            stdout, stderr = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            proc.communicate()
            raise GitError(f"git {label} timed out after {limit:g}s") from None
        if proc.returncode not in ok_codes:
            raise GitError(
                f"git {label} failed (exit {proc.returncode}): {_summarise(stderr)}",
                returncode=proc.returncode,
            )
        return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(proc.pid, signal.SIGKILL)

    def _stream_records(self, *args: str) -> Iterator[bytes]:
        """Yield NUL-separated records of ``git <args>`` as they arrive; the caller may stop early.

        Reading incrementally keeps memory bounded on long histories; a watchdog enforces the
        timeout on the whole stream.
        """
        command = [self._git, "--literal-pathspecs", *args]
        try:
            proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror}") from None
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            self._kill_group(proc)

        watchdog = threading.Timer(self.timeout, on_timeout)
        watchdog.daemon = True
        watchdog.start()
        finished = False
        try:
            assert proc.stdout is not None
            pending = b""
            while chunk := proc.stdout.read1(65536):
                pending += chunk
                *records, pending = pending.split(b"\x00")
                yield from records
            if pending:
                yield pending
            finished = True
        finally:
            watchdog.cancel()
            if not finished:
                self._kill_group(proc)  # the caller stopped early: git is not needed any more
            assert proc.stderr is not None
            stderr = proc.stderr.read() if finished else b""
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        if timed_out.is_set():
            raise GitError(f"git {args[0]} timed out after {self.timeout:g}s")
        if proc.returncode != 0:
            raise GitError(f"git {args[0]} failed (exit {proc.returncode}): {_summarise(stderr)}")

    # --- setting up --------------------------------------------------------------------------

    def is_repo(self) -> bool:
        """True when ``workdir`` holds a git working copy."""
        return (self.workdir / ".git").exists()

    def clone(self, remote: str, branch: str) -> None:
        """Clone ``branch`` of ``remote`` into ``workdir`` (which must be absent or empty)."""
        _check_ref_name(branch)
        if self.workdir.exists() and any(self.workdir.iterdir()):
            raise GitError(f"cannot clone into {self.workdir}: the folder is not empty")
        self.workdir.parent.mkdir(parents=True, exist_ok=True)
        self._run(
            "clone", "--quiet", "--branch", branch, "--origin", REMOTE, "--", remote, str(self.workdir),
            cwd=self.workdir.parent,
        )

    def init(self, branch: str) -> None:
        """Create an empty working copy (a vault with no remote yet)."""
        _check_ref_name(branch)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._run("init", "--quiet", "--initial-branch", branch)

    def set_remote(self, remote: str) -> None:
        """Point ``origin`` at ``remote`` (adding it when missing)."""
        existing = self._run("remote", ok_codes=(0,)).stdout.decode().split()
        if REMOTE in existing:
            self._run("remote", "set-url", REMOTE, remote)
        else:
            self._run("remote", "add", REMOTE, remote)

    # --- reading -----------------------------------------------------------------------------

    def head_sha(self) -> str | None:
        """The commit checked out, or None in a repository with no commit yet."""
        result = self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok_codes=(0, 1))
        return result.stdout.decode().strip() or None

    def remote_sha(self, branch: str) -> str | None:
        """The last fetched commit of ``origin/<branch>``, or None if it was never fetched."""
        ref = f"refs/remotes/{REMOTE}/{_check_ref_name(branch)}^{{commit}}"
        result = self._run("rev-parse", "--verify", "--quiet", ref, ok_codes=(0, 1))
        return result.stdout.decode().strip() or None

    def fetch(self, branch: str) -> str:
        """Fetch ``branch`` from ``origin`` (accepting force-pushes); return the remote's commit."""
        _check_ref_name(branch)
        refspec = f"+refs/heads/{branch}:refs/remotes/{REMOTE}/{branch}"
        self._run("fetch", "--quiet", "--no-tags", "--prune", REMOTE, refspec)
        sha = self.remote_sha(branch)
        if sha is None:
            raise GitError(f"remote branch {branch!r} not found after fetch")
        return sha

    def is_ancestor(self, older: str, newer: str) -> bool:
        """True when ``older`` is reachable from ``newer`` (a fast-forward is possible)."""
        result = self._run("merge-base", "--is-ancestor", _check_sha(older), _check_sha(newer), ok_codes=(0, 1))
        return result.returncode == 0

    def changes(self, old: str | None, new: str) -> list[Change]:
        """Files added, modified, renamed or deleted between commits ``old`` and ``new``.

        ``old=None`` means "from nothing" (every file is added). Renames are detected
        (``-M``); a type change (file <-> symlink) counts as a modification and a copy as an add.
        """
        base = EMPTY_TREE_SHA1 if old is None else _check_sha(old)
        result = self._run(
            "-c", "core.quotePath=false", "diff", "--no-ext-diff", "--no-textconv", "--name-status", "-M", "-z",
            base, _check_sha(new), "--",
        )
        return _parse_name_status(result.stdout)

    def ls_files(self, prefix: str = "") -> list[str]:
        """Tracked files under ``prefix`` (a folder such as ``proj/runbooks``; ``""`` for all), sorted."""
        args = ["ls-files", "-z", "--"]
        if prefix:
            args.append(prefix.rstrip("/"))
        out = self._run(*args).stdout
        return sorted(p.decode("utf-8", "surrogateescape") for p in out.split(b"\x00") if p)

    def show(self, sha: str, path: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of ``path`` as of commit ``sha``; :class:`GitObjectMissing` if absent.

        ``max_bytes`` refuses (with :class:`GitError`) blobs larger than that before reading them.
        """
        spec = f"{_check_sha(sha)}:{path}"
        size = self._run("cat-file", "-s", spec, ok_codes=(0, 128))
        if size.returncode != 0:
            raise GitObjectMissing(f"{path} does not exist at {sha[:12]}", returncode=size.returncode)
        if max_bytes is not None and int(size.stdout) > max_bytes:
            raise GitError(f"{path} at {sha[:12]} is {int(size.stdout)} bytes, over the {max_bytes} limit")
        return self._run("cat-file", "blob", spec).stdout

    def last_commit(self, path: str) -> CommitInfo | None:
        """The most recent commit that touched ``path``, or None if it has no history."""
        if self.head_sha() is None:
            return None
        result = self._run("log", "-1", "--no-show-signature", "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%B", "--", path)
        text = result.stdout.decode("utf-8", "replace")
        if not text.strip():
            return None
        sha, author, email, date, message = text.split("\x1f", 4)
        return CommitInfo(sha, author, datetime.fromisoformat(date), message.strip(), email)

    def last_commits(self, prefix: str = "") -> dict[str, CommitInfo]:
        """For every tracked file under ``prefix``, the last commit that touched it (one ``git log``).

        The history is streamed and reading stops as soon as every file has been seen, so a long
        history costs only as much as it takes to reach the oldest relevant commit. The message is
        the commit's subject line.
        """
        wanted = set(self.ls_files(prefix))
        found: dict[str, CommitInfo] = {}
        if not wanted:
            return found
        args = ["log", "--no-show-signature", "-z", "--name-only", "--format=%x1e%H%x1f%an%x1f%ae%x1f%aI%x1f%s", "--"]
        if prefix:
            args.append(prefix.rstrip("/"))
        current: CommitInfo | None = None
        first_name = False
        records = self._stream_records(*args)
        try:
            for raw in records:
                text = raw.decode("utf-8", "surrogateescape")
                if _HEADER_START.match(text):
                    sha, author, email, date, subject = text[1:].split("\x1f", 4)
                    current = CommitInfo(sha, author, datetime.fromisoformat(date), subject, email)
                    first_name = True
                    continue
                if first_name and text.startswith("\n"):
                    text = text[1:]
                first_name = False
                if current is not None and text in wanted and text not in found:
                    found[text] = current
                    if len(found) == len(wanted):
                        break
        finally:
            records.close()
        return found

    # --- changing ----------------------------------------------------------------------------

    def sync_to_remote(self, branch: str) -> SyncOutcome:
        """Make the working copy equal to ``origin/<branch>``.

        Fast-forwards when the current commit is an ancestor of the remote one. When it is not
        (the remote was force-pushed or rewound, or a local commit never reached the remote), the
        working copy is reset hard to the remote and ``forced`` is True, so the caller re-indexes
        by diffing ``old_sha`` against ``new_sha`` instead of trusting incremental history.
        ``old_sha`` is the local ``branch`` before the sync, and ``branch`` ends up checked out.
        """
        # Compare against the local branch, not HEAD: a proposal branch may be checked out.
        local = self._run("rev-parse", "--verify", "--quiet", f"refs/heads/{_check_ref_name(branch)}^{{commit}}", ok_codes=(0, 1))
        old = local.stdout.decode().strip() or None
        on_branch = self._run("symbolic-ref", "--quiet", "HEAD", ok_codes=(0, 1)).stdout.decode().strip()
        new = self.fetch(branch)
        if old == new and on_branch == f"refs/heads/{branch}":
            return SyncOutcome(old, new, forced=False)
        forced = old is not None and not self.is_ancestor(old, new)
        # checkout -B moves the branch and the work tree in one step, discarding local edits.
        self._run("checkout", "--quiet", "--force", "-B", branch, f"refs/remotes/{REMOTE}/{branch}")
        return SyncOutcome(old, new, forced=forced)

    def commit_paths(
        self,
        paths: Sequence[str],
        message: str,
        *,
        author_name: str,
        author_email: str,
        committer_name: str = "poimen-memory",
        committer_email: str = "poimen-memory@localhost",
    ) -> str | None:
        """Stage ``paths`` as they are on disk (including deletions) and commit only them.

        Returns the new commit id, or None when the files already match the last commit.
        """
        if not paths:
            raise GitError("nothing to commit: no paths given")
        if not message.strip():
            raise GitError("commit message is empty")
        identity = {
            "GIT_AUTHOR_NAME": _check_identity(author_name, "author name"),
            "GIT_AUTHOR_EMAIL": _check_identity(author_email, "author email"),
            "GIT_COMMITTER_NAME": _check_identity(committer_name, "committer name"),
            "GIT_COMMITTER_EMAIL": _check_identity(committer_email, "committer email"),
        }
        self._run("add", "--all", "--", *paths)
        has_head = self.head_sha() is not None
        if has_head:
            staged = self._run("diff", "--cached", "--quiet", "HEAD", "--", *paths, ok_codes=(0, 1))
            if staged.returncode == 0:
                return None
        # "-m" in argv (no shell, no editor); "-- paths" commits only these files even if other
        # changes happen to be staged. Hooks are skipped: the vault is service-owned.
        self._run(
            "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message, "--", *paths,
            extra_env=identity,
        )
        return self.head_sha()

    def create_branch(self, name: str, start: str = "HEAD", *, checkout: bool = True) -> None:
        """Create branch ``name`` at ``start`` (and check it out unless ``checkout`` is False)."""
        _check_ref_name(name)
        if checkout:
            self._run("checkout", "--quiet", "-b", name, start)
        else:
            self._run("branch", "--quiet", name, start)

    def checkout(self, branch: str) -> None:
        """Switch the working copy to an existing local branch."""
        self._run("checkout", "--quiet", _check_ref_name(branch))

    def push(self, branch: str, *, remote_branch: str | None = None, force_with_lease: bool = False) -> None:
        """Push local ``branch`` to ``origin`` as ``remote_branch`` (default: the same name)."""
        target = _check_ref_name(remote_branch or branch)
        args = ["push", "--quiet"]
        if force_with_lease:
            args.append("--force-with-lease")
        args += [REMOTE, f"refs/heads/{_check_ref_name(branch)}:refs/heads/{target}"]
        self._run(*args)


def _parse_name_status(out: bytes) -> list[Change]:
    """Parse ``git diff --name-status -z``: ``X\\0path\\0`` or ``R<score>\\0old\\0new\\0``."""
    fields = [f.decode("utf-8", "surrogateescape") for f in out.split(b"\x00")]
    if fields and fields[-1] == "":
        fields.pop()
    changes: list[Change] = []
    i = 0
    while i < len(fields):
        status = fields[i]
        code = status[:1]
        if code in ("R", "C"):
            old_path, new_path = fields[i + 1], fields[i + 2]
            i += 3
            if code == "R":
                changes.append(Change("renamed", new_path, old_path))
            else:
                changes.append(Change("added", new_path))
            continue
        path = fields[i + 1]
        i += 2
        if code == "A":
            changes.append(Change("added", path))
        elif code == "D":
            changes.append(Change("deleted", path))
        elif code in ("M", "T"):
            changes.append(Change("modified", path))
        else:  # U (unmerged) or X (unknown) cannot appear between two commits
            raise GitError(f"unexpected diff status {status!r} for {path}")
    return changes
