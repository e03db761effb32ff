"""A real HTTP stand-in for a Forgejo server, checked against Forgejo's published Swagger description.

No Forgejo can run in CI, so the client is tested against this: a threaded ``http.server`` that

* routes every request through the swagger (``basePath`` + ``paths``): an unknown path or method is
  a *violation*; path and query parameters must be declared there and have the declared type;
* validates JSON bodies against the operation's body schema with ``jsonschema`` (Draft 4, which is
  what Swagger 2.0 schemas are), plus a check for body fields the definition does not declare
  (Swagger allows extra fields, so a misspelt optional field would otherwise pass silently);
* keeps a small in-memory repository (branches, files, commits, pull requests, statuses) so the
  implemented operations answer like Forgejo does, and validates each of its own answers against
  the swagger response schema (a violation too, so the stand-in cannot drift from the spec).

Violations are recorded in ``StandIn.violations`` and answered with 400, so a test fails twice:
the client raises, and the fixture teardown asserts the list is empty.
The swagger file is read from ``<repo>/../shared/reference/forgejo-api-v1.swagger.json``
(``MEM_FORGEJO_SWAGGER`` overrides); tests skip with a reason when it is absent.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from jsonschema import Draft4Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

SWAGGER_PATH = Path(
    os.environ.get(
        "MEM_FORGEJO_SWAGGER",
        Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "forgejo-api-v1.swagger.json",
    )
)
SWAGGER_URI = "urn:forgejo-swagger"
TOKEN = "standin-token-0123456789"


def load_swagger() -> dict[str, Any]:
    """The swagger document, or a pytest skip naming where it was looked for."""
    if not SWAGGER_PATH.is_file():
        pytest.skip(f"Forgejo swagger not found at {SWAGGER_PATH} (a fresh clone has no ../shared)")
    return json.loads(SWAGGER_PATH.read_text(encoding="utf-8"))


def git_blob_sha(content: bytes) -> str:
    """The id git gives a blob, which is what Forgejo reports as a file's ``sha``."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Route:
    """One swagger operation and the regex matching its path."""

    template: str
    method: str
    operation: dict[str, Any]
    pattern: re.Pattern[str]
    literal_weight: int
    param_names: list[str]

    @property
    def operation_id(self) -> str:
        return str(self.operation.get("operationId", f"{self.method} {self.template}"))


class SwaggerContract:
    """Routes and validates requests and responses against a Swagger 2.0 document."""

    def __init__(self, swagger: dict[str, Any]) -> None:
        self.swagger = swagger
        self.base_path = swagger.get("basePath", "")
        self._registry = Registry().with_resource(SWAGGER_URI, Resource(contents=swagger, specification=DRAFT4))
        self.routes: list[Route] = []
        for template, item in swagger["paths"].items():
            shared_params = item.get("parameters", [])
            for method, operation in item.items():
                if method == "parameters":
                    continue
                operation = {**operation, "parameters": [*shared_params, *operation.get("parameters", [])]}
                regex, names = "", []
                for part in re.split(r"(\{[^}]+\})", template):
                    if part.startswith("{"):
                        names.append(part[1:-1])  # may contain '-', so groups are positional
                        # Forgejo's {filepath} is a wildcard that spans slashes.
                        regex += "(.+)" if part == "{filepath}" else "([^/]+)"
                    else:
                        regex += re.escape(part)
                weight = len(re.sub(r"\{[^}]+\}", "", template))
                route = Route(template, method.upper(), operation, re.compile(f"^{regex}$"), weight, names)
                self.routes.append(route)

    def match(self, method: str, raw_path: str) -> tuple[Route | None, dict[str, str], str]:
        """The route for ``method raw_path`` and its decoded path params, or (None, {}, reason)."""
        if not raw_path.startswith(self.base_path + "/"):
            return None, {}, f"path {raw_path} is outside basePath {self.base_path}"
        path = raw_path[len(self.base_path):]
        candidates = [r for r in self.routes if r.pattern.match(path)]
        if not candidates:
            return None, {}, f"no swagger path matches {path}"
        with_method = [r for r in candidates if r.method == method]
        if not with_method:
            return None, {}, f"{method} is not defined for {candidates[0].template}"
        route = max(with_method, key=lambda r: r.literal_weight)
        found = route.pattern.match(path)
        assert found is not None
        params = {name: unquote(value) for name, value in zip(route.param_names, found.groups(), strict=True)}
        return route, params, ""

    def check_parameters(self, route: Route, path_params: dict[str, str], query: dict[str, list[str]]) -> list[str]:
        """Problems with path and query parameters (undeclared, missing, wrong type)."""
        problems: list[str] = []
        declared = {(p["in"], p["name"]): p for p in route.operation["parameters"] if "in" in p}
        for name, value in path_params.items():
            spec = declared.get(("path", name))
            if spec is None:
                problems.append(f"path parameter {name} is not declared")
            elif not self._scalar_ok(spec, value):
                problems.append(f"path parameter {name}={value!r} is not a valid {spec.get('type')}")
        for name, values in query.items():
            spec = declared.get(("query", name))
            if spec is None:
                problems.append(f"query parameter {name!r} is not declared for {route.operation_id}")
                continue
            for value in values:
                if not self._scalar_ok(spec, value):
                    problems.append(f"query parameter {name}={value!r} is not a valid {spec.get('type')}")
        for (where, name), spec in declared.items():
            if where == "query" and spec.get("required") and name not in query:
                problems.append(f"required query parameter {name!r} is missing")
        return problems

    @staticmethod
    def _scalar_ok(spec: dict[str, Any], value: str) -> bool:
        kind = spec.get("type")
        if kind == "integer":
            return re.fullmatch(r"-?\d+", value) is not None
        if kind == "boolean":
            return value in ("true", "false")
        if "enum" in spec:
            return value in spec["enum"]
        return True

    def check_body(self, route: Route, body: Any, present: bool) -> list[str]:
        """Problems with the JSON body against the operation's ``in: body`` schema."""
        spec = next((p for p in route.operation["parameters"] if p.get("in") == "body"), None)
        if spec is None:
            return ["operation takes no body but one was sent"] if present else []
        if not present:
            return ["required body is missing"] if spec.get("required") else []
        schema = spec["schema"]
        problems = [f"body{_where(e.absolute_path)}: {e.message}" for e in self._validator(schema).iter_errors(body)]
        problems += self._unknown_fields(body, schema, "body")
        return problems

    def check_response(self, route: Route, status: int, body: Any) -> list[str]:
        """Problems with a response the stand-in is about to send (declared statuses only)."""
        declared = route.operation.get("responses", {}).get(str(status))
        if declared is None:
            return [] if status >= 400 else [f"status {status} is not declared for {route.operation_id}"]
        declared = self._deref(declared)
        if "schema" not in declared:
            return []
        # Swagger 2.0 cannot say "nullable"; Forgejo sends null for absent optional values.
        cleaned = _drop_nulls(body)
        return [
            f"response{_where(e.absolute_path)}: {e.message}"
            for e in self._validator(declared["schema"]).iter_errors(cleaned)
        ]

    def _validator(self, schema: dict[str, Any]) -> Draft4Validator:
        return Draft4Validator(self._absolute(schema), registry=self._registry)

    def _absolute(self, schema: Any) -> Any:
        # Refs inside the swagger are "#/definitions/X"; a free-standing schema needs the base URI.
        if isinstance(schema, dict):
            return {
                k: (SWAGGER_URI + v if k == "$ref" and isinstance(v, str) and v.startswith("#") else self._absolute(v))
                for k, v in schema.items()
            }
        if isinstance(schema, list):
            return [self._absolute(v) for v in schema]
        return schema

    def _deref(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.swagger
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            node = target
        return node

    def _unknown_fields(self, value: Any, schema: dict[str, Any], where: str) -> list[str]:
        schema = self._deref(schema)
        problems: list[str] = []
        if isinstance(value, dict) and "properties" in schema:
            props = schema["properties"]
            for key, item in value.items():
                if key not in props:
                    problems.append(f"{where}.{key} is not a field of the swagger definition")
                else:
                    problems += self._unknown_fields(item, props[key], f"{where}.{key}")
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problems += self._unknown_fields(item, schema["items"], f"{where}[{i}]")
        return problems


def _where(path: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value if v is not None]
    return value


class ApiError(Exception):
    """Raised by an operation to answer with an error status and Forgejo's APIError body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Commit:
    sha: str
    message: str
    author: dict[str, str]
    parents: list[str]
    tree: dict[str, bytes]
    created: str = field(default_factory=_now)


class StandInRepo:
    """The in-memory state of one repository."""

    def __init__(self, owner: str, name: str, default_branch: str = "main") -> None:
        self.owner, self.name, self.default_branch = owner, name, default_branch
        self.commits: dict[str, Commit] = {}
        self.branches: dict[str, str] = {}
        self.pulls: dict[int, dict[str, Any]] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        self._counter = itertools.count(1)
        self.commit(default_branch, {}, "Initial commit", {"name": "Owner", "email": "owner@example.test"})

    def commit(self, branch: str, tree: dict[str, bytes], message: str, author: dict[str, str]) -> Commit:
        parent = self.branches.get(branch)
        seed = f"{parent}\n{message}\n{next(self._counter)}\n" + "".join(sorted(tree))
        sha = hashlib.sha1(seed.encode()).hexdigest()
        commit = Commit(sha, message, author, [parent] if parent else [], dict(tree))
        self.commits[sha] = commit
        self.branches[branch] = sha
        return commit

    def resolve(self, ref: str) -> Commit:
        sha = self.branches.get(ref, ref)
        if sha not in self.commits:
            raise ApiError(404, f"ref {ref!r} does not exist")
        return self.commits[sha]


class StandIn:
    """The running stand-in: ``base_url`` for the client, hooks for tests, and what it observed."""

    def __init__(self, swagger: dict[str, Any], *, owner: str = "team", name: str = "vault") -> None:
        self.contract = SwaggerContract(swagger)
        self.repo = StandInRepo(owner, name)
        self.violations: list[str] = []
        self.operations: list[str] = []  # operationIds served, in order
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="forgejo-standin", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the client adds ``/api/v1``)."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    # --- test hooks --------------------------------------------------------------------------

    def seed(self, files: dict[str, bytes], *, branch: str = "main", message: str = "Seed") -> str:
        """Commit ``files`` on ``branch`` (on top of what is there); return the commit sha."""
        with self._lock:
            tree = dict(self.repo.resolve(branch).tree) if branch in self.repo.branches else {}
            tree.update(files)
            return self.repo.commit(branch, tree, message, {"name": "Seeder", "email": "seed@example.test"}).sha

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (to exercise retries)."""
        with self._lock:
            self._failures.extend([status] * count)

    def merge_pull(self, number: int) -> str:
        """Merge pull request ``number`` into its base (as a maintainer would in the web UI)."""
        with self._lock:
            pull = self.repo.pulls[number]
            head = self.repo.resolve(pull["head"]["ref"])
            merged = self.repo.commit(pull["base"]["ref"], head.tree, f"Merge pull request #{number}", head.author)
            pull.update(state="closed", merged=True, merge_commit_sha=merged.sha, merged_at=_now(), closed_at=_now())
            return merged.sha

    def add_status(self, ref: str, context: str, state: str) -> None:
        """Record a CI status on the commit ``ref`` points at."""
        with self._lock:
            sha = self.repo.resolve(ref).sha
            entries = self.repo.statuses.setdefault(sha, [])
            entries.append(
                {
                    "id": len(entries) + 1,
                    "context": context,
                    "status": state,
                    "description": f"{context} is {state}",
                    "target_url": f"{self.base_url}/ci/{len(entries) + 1}",
                    "url": f"{self.base_url}/api/v1/statuses/{sha}",
                    "created_at": _now(),
                    "updated_at": _now(),
                }
            )

    # --- request handling --------------------------------------------------------------------

    def handle(self, method: str, raw_url: str, headers: Any, raw_body: bytes) -> tuple[int, Any]:
        """Route, validate and answer one request; returns (status, JSON-able body or None)."""
        url = urlsplit(raw_url)
        self.requests.append((method, url.path))
        with self._lock:
            if self._failures:
                status = self._failures.pop(0)
                return status, {"message": "injected failure", "url": ""}
        route, path_params, reason = self.contract.match(method, url.path)
        if route is None:
            return self._violation(reason)
        problems = self.contract.check_parameters(route, path_params, parse_qs(url.query, keep_blank_values=True))
        body: Any = None
        present = bool(raw_body)
        if present:
            if not headers.get("Content-Type", "").startswith("application/json"):
                problems.append("body sent without Content-Type: application/json")
            try:
                body = json.loads(raw_body)
            except ValueError:
                problems.append("body is not JSON")
        if not problems:
            problems = self.contract.check_body(route, body, present)
        if problems:
            return self._violation(f"{route.operation_id}: " + "; ".join(problems))
        if headers.get("Authorization") != f"token {TOKEN}":
            return 401, {"message": "token is required", "url": ""}
        self.operations.append(route.operation_id)
        operation = getattr(self, f"op_{route.operation_id}", None)
        if operation is None:
            return 501, {"message": f"stand-in does not implement {route.operation_id}", "url": ""}
        if path_params.get("owner") != self.repo.owner or path_params.get("repo") != self.repo.name:
            return 404, {"message": "repository does not exist", "url": "", "errors": []}
        try:
            with self._lock:
                status, answer = operation(path_params, parse_qs(url.query), body)
        except ApiError as exc:
            status, answer = exc.status, {"message": exc.message, "url": ""}
        for problem in self.contract.check_response(route, status, answer):
            self.violations.append(f"stand-in answer to {route.operation_id}: {problem}")
        return status, answer

    def _violation(self, reason: str) -> tuple[int, Any]:
        self.violations.append(reason)
        return 400, {"message": f"swagger violation: {reason}", "url": ""}

    # --- shapes ------------------------------------------------------------------------------

    def _user(self) -> dict[str, Any]:
        return {"id": 1, "login": self.repo.owner, "full_name": "Team", "email": "team@example.test"}

    def _repository(self) -> dict[str, Any]:
        r = self.repo
        html = f"{self.base_url}/{r.owner}/{r.name}"
        return {
            "id": 7, "name": r.name, "full_name": f"{r.owner}/{r.name}", "owner": self._user(),
            "default_branch": r.default_branch, "empty": False, "private": True, "fork": False,
            "html_url": html, "clone_url": html + ".git", "url": f"{self.base_url}/api/v1/repos/{r.owner}/{r.name}",
            "has_pull_requests": True, "archived": False, "mirror": False, "object_format_name": "sha1",
        }

    def _branch(self, name: str) -> dict[str, Any]:
        commit = self.repo.resolve(name)
        author = {"name": commit.author["name"], "email": commit.author["email"], "username": ""}
        return {
            "name": name,
            "commit": {
                "id": commit.sha, "message": commit.message, "url": f"{self.base_url}/commit/{commit.sha}",
                "author": author, "committer": author, "timestamp": commit.created,
                "added": [], "modified": [], "removed": [],
            },
            "protected": False, "user_can_push": True, "user_can_merge": True, "enable_status_check": False,
            "status_check_contexts": [], "required_approvals": 0, "effective_branch_protection_name": "",
        }

    def _contents(self, path: str, content: bytes, commit: Commit) -> dict[str, Any]:
        sha = git_blob_sha(content)
        self_url = f"{self.base_url}/api/v1/repos/{self.repo.owner}/{self.repo.name}/contents/{path}"
        return {
            "name": path.rsplit("/", 1)[-1], "path": path, "sha": sha, "type": "file", "size": len(content),
            "encoding": "base64", "content": base64.b64encode(content).decode(),
            "last_commit_sha": commit.sha, "url": self_url, "html_url": f"{self.base_url}/src/{path}",
            "git_url": f"{self.base_url}/git/blobs/{sha}", "download_url": f"{self.base_url}/raw/{path}",
            "_links": {"self": self_url, "git": f"{self.base_url}/git/blobs/{sha}", "html": f"{self.base_url}/src/{path}"},
        }

    # --- operations (named after swagger operationIds) ----------------------------------------

    def op_repoGet(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        return 200, self._repository()

    def op_repoGetBranch(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        if params["branch"] not in self.repo.branches:
            raise ApiError(404, "branch does not exist")
        return 200, self._branch(params["branch"])

    def op_repoCreateBranch(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        name = body["new_branch_name"]
        if name in self.repo.branches:
            raise ApiError(409, f"branch {name} already exists")
        source = self.repo.resolve(body.get("old_ref_name") or body.get("old_branch_name") or self.repo.default_branch)
        self.repo.branches[name] = source.sha
        return 201, self._branch(name)

    def op_repoGetContents(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        commit = self.repo.resolve((query.get("ref") or [self.repo.default_branch])[0])
        path = params["filepath"]
        if path not in commit.tree:
            if any(p.startswith(path.rstrip("/") + "/") for p in commit.tree):
                return 200, [self._contents(p, commit.tree[p], commit) for p in sorted(commit.tree) if p.startswith(path + "/")]
            raise ApiError(404, f"file {path} does not exist")
        return 200, self._contents(path, commit.tree[path], commit)

    def op_repoChangeFiles(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        base = body.get("branch") or self.repo.default_branch
        if base not in self.repo.branches:
            raise ApiError(404, f"branch {base} does not exist")
        target = body.get("new_branch") or base
        if body.get("new_branch") and target in self.repo.branches:
            raise ApiError(422, f"branch {target} already exists")
        tree = dict(self.repo.resolve(base).tree)
        results: list[tuple[str, bytes | None]] = []
        for op in body["files"]:
            path, kind = op["path"], op["operation"]
            source = op.get("from_path") or path
            if kind == "create" and path in tree:
                raise ApiError(422, f"file {path} already exists")
            if kind in ("update", "delete"):
                if source not in tree:
                    raise ApiError(404, f"file {source} does not exist")
                if op.get("sha") != git_blob_sha(tree[source]):
                    raise ApiError(422, f"sha does not match for {source}")
            if kind == "delete":
                del tree[path]
                results.append((path, None))
                continue
            try:
                content = base64.b64decode(op.get("content") or "", validate=True)
            except ValueError:
                raise ApiError(422, f"content of {path} is not base64") from None
            if source != path:
                del tree[source]
            tree[path] = content
            results.append((path, content))
        who = body.get("author") or body.get("committer") or {"name": "Token User", "email": "user@example.test"}
        if self.repo.branches.get(target) is None:
            self.repo.branches[target] = self.repo.branches[base]
        commit = self.repo.commit(target, tree, body.get("message") or "Update files", who)
        signature = {"name": who.get("name", ""), "email": who.get("email", ""), "date": commit.created}
        return 201, {
            "files": [self._contents(p, c, commit) if c is not None else None for p, c in results],
            "commit": {
                "sha": commit.sha, "url": f"{self.base_url}/api/v1/git/commits/{commit.sha}",
                "html_url": f"{self.base_url}/commit/{commit.sha}", "message": commit.message,
                "author": signature, "committer": signature, "created": commit.created,
                "parents": [{"sha": p, "url": f"{self.base_url}/commit/{p}", "created": commit.created} for p in commit.parents],
                "tree": {"sha": hashlib.sha1(commit.sha.encode()).hexdigest(), "url": "", "created": commit.created},
            },
            "verification": {"verified": False, "reason": "gpg.error.not_signed_commit", "signature": "", "payload": ""},
        }

    def op_repoCreatePullRequest(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        missing = [f for f in ("title", "head", "base") if not body.get(f)]
        if missing:
            raise ApiError(422, f"[{', '.join(missing)}]: Required")
        head, base = body["head"], body["base"]
        for ref in (head, base):
            if ref not in self.repo.branches:
                raise ApiError(404, f"branch {ref} does not exist")
        for pull in self.repo.pulls.values():
            if pull["state"] == "open" and pull["head"]["ref"] == head and pull["base"]["ref"] == base:
                raise ApiError(409, f"pull request already exists for these targets [id: {pull['id']}]")
        number = len(self.repo.pulls) + 1

        def branch_info(ref: str) -> dict[str, Any]:
            return {"label": ref, "ref": ref, "sha": self.repo.branches[ref], "repo_id": 7, "repo": self._repository()}

        html = f"{self.base_url}/{self.repo.owner}/{self.repo.name}/pulls/{number}"
        pull = {
            "id": 100 + number, "number": number, "title": body["title"], "body": body.get("body", ""),
            "state": "open", "merged": False, "merged_at": None, "merge_commit_sha": None, "mergeable": True,
            "head": branch_info(head), "base": branch_info(base), "user": self._user(), "html_url": html,
            "url": html, "diff_url": html + ".diff", "patch_url": html + ".patch",
            "created_at": _now(), "updated_at": _now(), "comments": 0, "draft": False, "labels": [], "assignees": [],
        }
        self.repo.pulls[number] = pull
        return 201, pull

    def op_repoGetPullRequest(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        pull = self.repo.pulls.get(int(params["index"]))
        if pull is None:
            raise ApiError(404, "pull request does not exist")
        return 200, pull

    def op_repoGetCombinedStatusByRef(self, params: dict[str, str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        commit = self.repo.resolve(params["ref"])
        statuses = self.repo.statuses.get(commit.sha, [])
        states = {s["status"] for s in statuses}
        if states & {"error", "failure"}:
            state = "failure"
        elif "pending" in states:
            state = "pending"
        else:
            state = "success" if statuses else ""
        return 200, {
            "sha": commit.sha, "state": state, "statuses": statuses, "total_count": len(statuses),
            "commit_url": f"{self.base_url}/commit/{commit.sha}", "url": f"{self.base_url}/status/{commit.sha}",
            "repository": self._repository(),
        }


def _handler_for(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base-class signature
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                status, answer = standin.handle(self.command, self.path, self.headers, raw)
            except Exception as exc:  # a stand-in bug must show up as a violation, not a hang
                standin.violations.append(f"stand-in crashed: {exc!r}")
                status, answer = 500, {"message": "stand-in crashed", "url": ""}
            payload = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json;charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


@pytest.fixture(scope="session")
def forgejo_swagger() -> dict[str, Any]:
    """The parsed swagger document (skips the test when the file is absent)."""
    return load_swagger()


@pytest.fixture
def forgejo_standin(forgejo_swagger: dict[str, Any]) -> Iterator[StandIn]:
    """A running stand-in; the test fails at teardown if any request broke the swagger contract."""
    standin = StandIn(forgejo_swagger).start()
    try:
        yield standin
    finally:
        standin.stop()
    assert standin.violations == [], "requests or answers violated the Forgejo swagger:\n" + "\n".join(standin.violations)
