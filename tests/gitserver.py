"""A real git remote over smart HTTP for tests: ``git http-backend`` behind a threaded http.server.

Bare repositories live in a temp folder; clones, fetches and pushes go through the same HTTP
protocol a forge speaks, so the code under test exercises git's real transport (not a file:// path).

Use from a test (or import the fixture into ``conftest.py``)::

    from tests.gitserver import git_server  # noqa: F401  (the fixture)

    def test_x(git_server):
        url = git_server.create_repo("vault", files={"proj/a.md": "# A\\n"})
        editor = git_server.editor("vault")      # a second clone acting as "someone else"
        editor.write("proj/b.md", "# B\\n"); editor.commit_and_push("add b")

``GitServer(required_token="s3cret")`` answers 401 unless the request carries
``Authorization: token s3cret`` (or Basic auth whose password is the token).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

GIT_TIMEOUT_SECS = 60
HTTP_BACKEND = "http-backend"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Remote Editor",
    "GIT_AUTHOR_EMAIL": "editor@example.test",
    "GIT_COMMITTER_NAME": "Remote Editor",
    "GIT_COMMITTER_EMAIL": "editor@example.test",
}


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run git for test setup; raise with stderr when it fails."""
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **_IDENTITY, **(env or {})}
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=full_env, capture_output=True, timeout=GIT_TIMEOUT_SECS, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode()


class _GitHTTPHandler(BaseHTTPRequestHandler):
    """Translate one HTTP request into a CGI call of ``git http-backend``."""

    protocol_version = "HTTP/1.1"
    server: _GitHTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base-class signature
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _authorised(self) -> bool:
        token = self.server.required_token
        if token is None:
            return True
        header = self.headers.get("Authorization", "")
        if header == f"token {token}":
            return True
        if header.startswith("Basic "):
            try:
                _, _, password = base64.b64decode(header[6:]).decode().partition(":")
            except ValueError:
                return False
            return password == token
        return False

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            # git switches to chunked uploads for pushes above http.postBuffer.
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        self.server.request_count += 1
        body = self._read_body()
        if not self._authorised():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        url = urlsplit(self.path)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": "tester",  # http-backend refuses anonymous pushes otherwise
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        result = subprocess.run(
            ["git", HTTP_BACKEND], input=body, env=env, capture_output=True, timeout=GIT_TIMEOUT_SECS, check=False
        )
        head, sep, payload = result.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = result.stdout.partition(b"\n\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        if result.returncode != 0 and status == 200:
            status, payload = 500, result.stderr
        self.send_response(status)
        for name, value in headers:
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _GitHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, required_token: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _GitHTTPHandler)
        self.root = root
        self.required_token = required_token
        self.request_count = 0


class RemoteEditor:
    """A separate clone of a served repository, standing in for a person who pushes to the remote."""

    def __init__(self, url: str, workdir: Path, branch: str = "main") -> None:
        self.url = url
        self.workdir = workdir
        self.branch = branch
        _git("clone", "--quiet", url, str(workdir))
        if _git("rev-parse", "--verify", "--quiet", "HEAD", cwd=workdir).strip():
            _git("checkout", "--quiet", branch, cwd=workdir)
        else:
            _git("checkout", "--quiet", "-b", branch, cwd=workdir)

    def write(self, path: str, text: str) -> None:
        """Create or overwrite a file (folders are created)."""
        target = self.workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def rename(self, old: str, new: str) -> None:
        """``git mv`` a file."""
        (self.workdir / new).parent.mkdir(parents=True, exist_ok=True)
        _git("mv", old, new, cwd=self.workdir)

    def delete(self, path: str) -> None:
        """``git rm`` a file."""
        _git("rm", "--quiet", path, cwd=self.workdir)

    def commit(self, message: str) -> str:
        """Commit everything in the work tree; return the commit id."""
        _git("add", "--all", cwd=self.workdir)
        _git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.workdir)
        return self.head()

    def commit_and_push(self, message: str) -> str:
        """Commit everything and push the branch; return the commit id."""
        sha = self.commit(message)
        self.push()
        return sha

    def push(self, *, force: bool = False) -> None:
        """Push the branch to the served repository."""
        args = ["push", "--quiet", "origin", f"{self.branch}:{self.branch}"]
        if force:
            args.insert(1, "--force")
        _git(*args, cwd=self.workdir)

    def reset_hard(self, ref: str) -> None:
        """Move the branch to ``ref`` (e.g. ``HEAD~1``), to prepare a force-push."""
        _git("reset", "--quiet", "--hard", ref, cwd=self.workdir)

    def pull(self) -> None:
        """Fetch and reset to the remote branch."""
        _git("fetch", "--quiet", "origin", cwd=self.workdir)
        _git("reset", "--quiet", "--hard", f"origin/{self.branch}", cwd=self.workdir)

    def head(self) -> str:
        """The commit checked out in this clone."""
        return _git("rev-parse", "HEAD", cwd=self.workdir).strip()


class GitServer:
    """Serves the bare repositories under a temp folder at ``http://127.0.0.1:<port>/<name>.git``."""

    def __init__(self, *, required_token: str | None = None) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix="gitserver-"))
        self.root = self._tmp / "repos"
        self.root.mkdir()
        self._httpd = _GitHTTPServer(self.root, required_token)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="gitserver", daemon=True
        )
        self._editors = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def request_count(self) -> int:
        """HTTP requests served so far (to check that traffic really went over HTTP)."""
        return self._httpd.request_count

    def start(self) -> GitServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and delete every repository."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> GitServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, name: str, *, token: str | None = None) -> str:
        """Clone URL of repository ``name`` (with ``token`` as Basic-auth password when given)."""
        if token:
            host_port = self.base_url.removeprefix("http://")
            return f"http://git:{token}@{host_port}/{name}.git"
        return f"{self.base_url}/{name}.git"

    def bare_path(self, name: str) -> Path:
        """The bare repository on disk."""
        return self.root / f"{name}.git"

    def create_repo(self, name: str, *, branch: str = "main", files: dict[str, str] | None = None) -> str:
        """Create a bare repository (push enabled), optionally seeded with ``files``; return its URL."""
        bare = self.bare_path(name)
        _git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare))
        _git("config", "http.receivepack", "true", cwd=bare)
        if files:
            seed = self._tmp / f"seed-{name}"
            _git("init", "--quiet", f"--initial-branch={branch}", str(seed))
            for path, text in files.items():
                target = seed / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            _git("add", "--all", cwd=seed)
            _git("commit", "--quiet", "-m", "Seed the vault", cwd=seed)
            _git("push", "--quiet", str(bare), f"{branch}:{branch}", cwd=seed)
            shutil.rmtree(seed, ignore_errors=True)
        return self.url(name)

    def editor(self, name: str, *, branch: str = "main") -> RemoteEditor:
        """A fresh clone of ``name`` to make and push commits as another person would."""
        self._editors += 1
        workdir = self._tmp / f"editor-{name}-{self._editors}"
        url = self.url(name, token=self._httpd.required_token)
        return RemoteEditor(url, workdir, branch)

    def branch_sha(self, name: str, branch: str = "main") -> str:
        """The commit a branch of the bare repository points at."""
        return _git("rev-parse", f"refs/heads/{branch}", cwd=self.bare_path(name)).strip()


def git_server_factory() -> Iterator[GitServer]:
    """Generator behind the ``git_server`` fixture; reuse it to build differently-scoped fixtures."""
    server = GitServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def git_server() -> Iterator[GitServer]:
    """A running :class:`GitServer` for one test."""
    yield from git_server_factory()


@pytest.fixture
def make_git_server() -> Iterator[Callable[..., GitServer]]:
    """Factory fixture: ``make_git_server(required_token="t")`` returns a started server, stopped after the test."""
    started: list[GitServer] = []

    def make(*, required_token: str | None = None) -> GitServer:
        server = GitServer(required_token=required_token).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()
