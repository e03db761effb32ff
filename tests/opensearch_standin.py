"""A real HTTP stand-in for the OpenSearch REST calls the lexical engine makes.

It serves the documented request and response shapes of: index exists/create, ``_bulk``,
``_refresh``, ``_search``, ``_delete_by_query``, ``_count`` and ``_cluster/health``; it checks each
request strictly and records every deviation in :attr:`OpenSearchStandIn.violations` (and answers
400), so a test fails when the client sends a shape a real cluster would reject. It keeps
documents and applies filters so writes are observable, but it does not rank (score = number of
query words found). No OpenSearch server can run in CI; the contract suite covers a real one when
``MEM_OPENSEARCH_URL`` is set.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

REQUIRED_SOURCE_FIELDS = {
    "chunk_id": str,
    "project": str,
    "source": str,
    "breadcrumb": str,
    "section": str,
    "content": str,
    "level": int,
    "tags": list,
    "updated_at": (str, type(None)),
}
REQUIRED_MAPPING_TYPES = {
    "chunk_id": "keyword",
    "project": "keyword",
    "source": "keyword",
    "content": "text",
    "breadcrumb": "text",
    "section": "text",
    "level": "integer",
    "tags": "keyword",
    "updated_at": "date",
}
_INVALID_INDEX_CHARS = set(' \\/*?"<>|,#:')


class Violation(Exception):
    """A request a real OpenSearch would reject or that breaks the engine's contract."""


@dataclass
class Recorded:
    """One request as the stand-in saw it."""

    method: str
    path: str
    params: dict[str, str]
    authorization: str | None
    body: bytes


@dataclass
class OpenSearchStandIn:
    """State and expectations of the stand-in; ``url`` is set once it listens."""

    user: str = "svc"
    password: str = "svc-secret"
    accepted_tokens: set[str] = field(default_factory=set)
    # Bulk items with these ids are answered with a per-item mapper_parsing_exception.
    reject_ids: set[str] = field(default_factory=set)
    url: str = ""
    indices: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # When set, requests block on it (bounded) before answering: lets a test provoke a client timeout.
    stall: threading.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def basic_auth(self) -> str:
        """The Authorization header value of the service credentials."""
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()

    def docs(self, index: str) -> dict[str, dict[str, Any]]:
        """The stored sources of ``index`` by ``_id``."""
        return self.indices.get(index, {}).get("docs", {})


def _error(kind: str, reason: str, status: int) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


def _check_index_name(name: str) -> None:
    if name != name.lower() or not name or name[0] in "-_+" or name in (".", ".."):
        raise Violation(f"invalid index name {name!r}")
    if _INVALID_INDEX_CHARS & set(name) or len(name.encode()) > 255:
        raise Violation(f"invalid index name {name!r}")


def _lucene_regexp_to_python(value: str) -> re.Pattern[str]:
    # The engine emits only `.`, `.*`, `[...]` and backslash-escapes: Python's syntax for those is the same.
    return re.compile(value)


def _match(source: dict[str, Any], query: dict[str, Any]) -> bool:
    """Evaluate the filter subset the engine uses (term, terms, range, regexp, bool)."""
    ((kind, spec),) = query.items()
    if kind == "bool":
        clauses = spec.get("filter", []) + spec.get("must", [])
        return all(_match(source, c) for c in clauses if "multi_match" not in c)
    if kind == "term":
        ((name, value),) = spec.items()
        got = source.get(name)
        return value in got if isinstance(got, list) else got == value
    if kind == "terms":
        ((name, values),) = spec.items()
        got = source.get(name)
        got_list = got if isinstance(got, list) else [got]
        return any(v in values for v in got_list)
    if kind == "range":
        ((name, bounds),) = spec.items()
        got = source.get(name)
        if got is None:
            return False
        return datetime.fromisoformat(got) >= datetime.fromisoformat(bounds["gte"])
    if kind == "regexp":
        ((name, body),) = spec.items()
        if body.get("flags") != "NONE":
            raise Violation("regexp queries must set flags NONE (no optional Lucene operators)")
        return _lucene_regexp_to_python(body["value"]).fullmatch(source.get(name, "")) is not None
    if kind == "match_all":
        return True
    raise Violation(f"unexpected query clause {kind!r}")


class _Handler(BaseHTTPRequestHandler):
    standin: OpenSearchStandIn  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _respond(self, status: int, payload: dict[str, Any] | None) -> None:
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=UTF-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _handle(self) -> None:
        st = self.standin
        parts = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("authorization")
        with st._lock:
            st.requests.append(Recorded(self.command, unquote(parts.path), params, auth, body))
        if st.stall is not None:
            st.stall.wait(timeout=10)
        try:
            status, payload = self._route(self.command, unquote(parts.path), params, auth, body)
        except Violation as exc:
            with st._lock:
                st.violations.append(f"{self.command} {parts.path}: {exc}")
            status, payload = _error("standin_violation", str(exc), 400)
        self._respond(status, payload)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _handle

    # --- routing ----------------------------------------------------------------------------

    def _authorize(self, auth: str | None, search: bool) -> tuple[int, dict[str, Any]] | None:
        st = self.standin
        if auth == st.basic_auth:
            return None
        if search and auth and auth.startswith("Bearer ") and auth[7:] in st.accepted_tokens:
            return None
        return _error("security_exception", "missing or unknown authentication", 401)

    def _resolve(self, expr: str, params: dict[str, str]) -> list[str]:
        st = self.standin
        names: list[str] = []
        for part in expr.split(","):
            if "*" in part:
                rx = re.compile(re.escape(part).replace(r"\*", ".*"))
                names.extend(n for n in st.indices if rx.fullmatch(n))
                continue
            _check_index_name(part)
            if part in st.indices:
                names.append(part)
            elif params.get("ignore_unavailable") != "true":
                raise LookupError(part)
        return names

    def _route(
        self, method: str, path: str, params: dict[str, str], auth: str | None, body: bytes
    ) -> tuple[int, dict[str, Any] | None]:
        st = self.standin
        segments = [s for s in path.split("/") if s]
        endpoint = segments[-1] if segments and segments[-1].startswith("_") else None
        is_search = endpoint == "_search"
        denied = self._authorize(auth, search=is_search)
        if denied:
            return denied
        if path == "/_cluster/health":
            return 200, {
                "cluster_name": "standin",
                "status": "green",
                "timed_out": False,
                "number_of_nodes": 1,
            }
        if path == "/_bulk" and method in ("POST", "PUT"):
            return self._bulk(body)
        if len(segments) == 1 and endpoint is None:
            name = segments[0]
            _check_index_name(name)
            if method == "HEAD":
                return (200 if name in st.indices else 404), None
            if method == "PUT":
                return self._create(name, body)
            raise Violation(f"unexpected {method} on an index")
        if len(segments) == 2 and endpoint in ("_refresh", "_search", "_delete_by_query", "_count"):
            try:
                names = self._resolve(segments[0], params)
            except LookupError as exc:
                return _error("index_not_found_exception", f"no such index [{exc}]", 404)
            if endpoint == "_refresh":
                if method != "POST":
                    raise Violation("_refresh must be POST")
                return 200, {"_shards": {"total": len(names), "successful": len(names), "failed": 0}}
            payload = json.loads(body) if body else {}
            if endpoint == "_search":
                return self._search(names, payload)
            if endpoint == "_delete_by_query":
                return self._delete_by_query(names, params, payload)
            return self._count(names, payload)
        raise Violation(f"unexpected request {method} {path}")

    def _create(self, name: str, body: bytes) -> tuple[int, dict[str, Any]]:
        st = self.standin
        if name in st.indices:
            return _error("resource_already_exists_exception", f"index [{name}] already exists", 400)
        spec = json.loads(body)
        props = spec.get("mappings", {}).get("properties", {})
        for fname, ftype in REQUIRED_MAPPING_TYPES.items():
            if props.get(fname, {}).get("type") != ftype:
                raise Violation(f"mapping of {fname!r} must be {ftype}")
        subfields = props["content"].get("fields", {})
        if subfields.get("english", {}).get("analyzer") != "english":
            raise Violation("content needs an english subfield")
        ngram = subfields.get("ngram", {}).get("analyzer")
        analysis = spec.get("settings", {}).get("analysis", {})
        if ngram not in analysis.get("analyzer", {}):
            raise Violation("content.ngram must use an analyzer defined in settings.analysis")
        st.indices[name] = {"mapping": spec["mappings"], "docs": {}}
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def _bulk(self, body: bytes) -> tuple[int, dict[str, Any]]:
        st = self.standin
        lines = body.decode().split("\n")
        if lines[-1] != "":
            raise Violation("_bulk body must end with a newline")
        lines = lines[:-1]
        if len(lines) % 2:
            raise Violation("every _bulk action line must be followed by a source line")
        items = []
        for action_line, source_line in zip(lines[::2], lines[1::2], strict=True):
            action = json.loads(action_line)
            if list(action) != ["index"]:
                raise Violation(f"expected an index action, got {list(action)}")
            meta = action["index"]
            name, doc_id = meta.get("_index"), meta.get("_id")
            if not name or not doc_id:
                raise Violation("index action needs _index and _id")
            if name not in st.indices:
                raise Violation(f"bulk into {name!r} before the index was created with its mapping")
            source = json.loads(source_line)
            for fname, ftype in REQUIRED_SOURCE_FIELDS.items():
                if fname not in source or not isinstance(source[fname], ftype):
                    raise Violation(f"source line lacks a valid {fname!r}")
            if set(source) - set(REQUIRED_SOURCE_FIELDS):
                raise Violation(
                    f"unknown fields {set(source) - set(REQUIRED_SOURCE_FIELDS)} (mapping is strict)"
                )
            if source["chunk_id"] != doc_id:
                raise Violation("_id must be the chunk_id")
            if doc_id in st.reject_ids:
                items.append(
                    {
                        "index": {
                            "_index": name,
                            "_id": doc_id,
                            "status": 400,
                            "error": {
                                "type": "mapper_parsing_exception",
                                "reason": "failed to parse field [content]",
                            },
                        }
                    }
                )
                continue
            existed = doc_id in st.indices[name]["docs"]
            st.indices[name]["docs"][doc_id] = source
            items.append(
                {
                    "index": {
                        "_index": name,
                        "_id": doc_id,
                        "_version": 1,
                        "result": "updated" if existed else "created",
                        "_shards": {"total": 1, "successful": 1, "failed": 0},
                        "status": 200 if existed else 201,
                    }
                }
            )
        errors = any(item["index"]["status"] >= 300 for item in items)
        return 200, {"took": 1, "errors": errors, "items": items}

    def _search(self, names: list[str], payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        query = payload.get("query", {})
        bool_q = query.get("bool")
        if not bool_q or list(query) != ["bool"]:
            raise Violation("search must be a bool query")
        must = bool_q.get("must", [])
        if len(must) != 1 or "multi_match" not in must[0]:
            raise Violation("bool.must must hold exactly one multi_match")
        mm = must[0]["multi_match"]
        if not mm.get("query") or not mm.get("fields"):
            raise Violation("multi_match needs query and fields")
        filters = bool_q.get("filter", [])
        if not any("terms" in f and "project" in f["terms"] for f in filters):
            raise Violation("bool.filter must restrict project")
        words = {w.lower() for w in mm["query"].split()}
        hits = []
        for name in names:
            for doc_id, source in self.standin.docs(name).items():
                if not all(_match(source, f) for f in filters):
                    continue
                text = " ".join((source["content"], source["section"], source["breadcrumb"])).lower()
                score = float(sum(1 for w in words if w in text))
                if score:
                    hits.append(
                        {
                            "_index": name,
                            "_id": doc_id,
                            "_score": score,
                            "_source": {k: source[k] for k in payload.get("_source", source)},
                        }
                    )
        hits.sort(key=lambda h: -h["_score"])
        hits = hits[: payload.get("size", 10)]
        return 200, {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
            "hits": {"max_score": hits[0]["_score"] if hits else None, "hits": hits},
        }

    def _delete_by_query(
        self, names: list[str], params: dict[str, str], payload: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if params.get("refresh") != "true":
            raise Violation("_delete_by_query must refresh")
        query = payload.get("query")
        if not query:
            raise Violation("_delete_by_query needs a query")
        deleted = 0
        for name in names:
            docs = self.standin.docs(name)
            for doc_id in [i for i, s in docs.items() if _match(s, query)]:
                del docs[doc_id]
                deleted += 1
        return 200, {
            "took": 1,
            "timed_out": False,
            "total": deleted,
            "deleted": deleted,
            "batches": 1,
            "version_conflicts": 0,
            "noops": 0,
            "failures": [],
        }

    def _count(self, names: list[str], payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        query = payload.get("query", {"match_all": {}})
        n = sum(1 for name in names for s in self.standin.docs(name).values() if _match(s, query))
        return 200, {
            "count": n,
            "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
        }


def serve(standin: OpenSearchStandIn) -> ThreadingHTTPServer:
    """Start the stand-in on a free local port (daemon thread); call ``shutdown()`` when done."""
    handler = type("BoundHandler", (_Handler,), {"standin": standin})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="opensearch-standin", daemon=True
    ).start()
    return server
