"""The OpenSearch backend's REST calls, checked against a real HTTP stand-in of the documented API."""

from __future__ import annotations

import fnmatch
import json
import re
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from shared.config import Settings
from shared.search.lexical import LexicalDoc, LexicalFilters, LexicalQuery, LexicalUnavailable
from shared.search.lexical_factory import get_lexical_index, reset_lexical_indexes
from shared.search.opensearch_index import (
    MAX_QUERY_TOKENS,
    OpenSearchLexicalIndex,
    bounded_query_text,
    glob_to_lucene_regexp,
    index_name,
)
from tests.opensearch_standin import OpenSearchStandIn, Recorded, _check_index_name, serve

WRITE_ENDPOINTS = ("_bulk", "_refresh", "_delete_by_query")


@pytest.fixture
def standin() -> Iterator[OpenSearchStandIn]:
    """A running stand-in that accepts the service credentials and one user token."""
    st = OpenSearchStandIn(accepted_tokens={"user-jwt"})
    server = serve(st)
    yield st
    if st.stall is not None:
        st.stall.set()
    server.shutdown()
    server.server_close()
    assert st.violations == [], st.violations


@pytest.fixture
def engine(standin: OpenSearchStandIn) -> OpenSearchLexicalIndex:
    """The engine pointed at the stand-in with service credentials."""
    return OpenSearchLexicalIndex(standin.url, user=standin.user, password=standin.password, timeout_secs=5)


def doc(chunk_id: str, project: str, content: str, **kw: object) -> LexicalDoc:
    """A chunk with defaults."""
    fields: dict[str, object] = {
        "source": "runbooks/ci.md",
        "breadcrumb": "Runbooks > CI",
        "section": "Notes",
        "level": 2,
        "tags": (),
        "updated_at": None,
    }
    fields.update(kw)
    return LexicalDoc(chunk_id=chunk_id, project=project, content=content, **fields)  # type: ignore[arg-type]


def requests_to(st: OpenSearchStandIn, endpoint: str) -> list[Recorded]:
    """Recorded requests whose path ends with ``endpoint``."""
    return [r for r in st.requests if r.path.rstrip("/").endswith(endpoint)]


# --- writes ------------------------------------------------------------------------------------


def test_upsert_creates_the_index_once_then_bulks_and_refreshes(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    stamp = datetime(2024, 3, 1, 8, 30, tzinfo=UTC)
    engine.upsert(
        [doc("c1", "Alpha", "disk full", tags=("ops",), updated_at=stamp), doc("c2", "Alpha", "oom")]
    )
    engine.upsert([doc("c1", "Alpha", "disk really full")])

    name = index_name("Alpha")
    creates = [r for r in standin.requests if r.method == "PUT"]
    assert [r.path for r in creates] == [f"/{name}"]
    assert len(requests_to(standin, "_bulk")) == 2
    assert [r.path for r in requests_to(standin, "_refresh")] == [f"/{name}/_refresh"] * 2
    stored = standin.docs(name)
    assert sorted(stored) == ["c1", "c2"]
    assert stored["c1"]["content"] == "disk really full"
    assert standin.docs(name)["c2"]["tags"] == []
    first_bulk = requests_to(standin, "_bulk")[0].body.decode().splitlines()
    assert json.loads(first_bulk[1])["updated_at"] == "2024-03-01T08:30:00+00:00"


def test_writes_use_the_service_credentials(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("c1", "p", "x")])
    engine.delete_sources("p", ["runbooks/ci.md"])
    engine.delete_chunks(["c1"])
    writes = [r for r in standin.requests if r.method == "PUT" or r.path.endswith(WRITE_ENDPOINTS)]
    assert len(writes) >= 5
    assert {r.authorization for r in writes} == {standin.basic_auth}


def test_rejected_bulk_items_raise_lexical_unavailable(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    standin.reject_ids.add("bad")
    with pytest.raises(LexicalUnavailable, match="rejected 1 of 2 chunks.*mapper_parsing_exception"):
        engine.upsert([doc("good", "p", "x"), doc("bad", "p", "y")])


def test_bad_documents_send_nothing(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    with pytest.raises(ValueError, match="chunk_id"):
        engine.upsert([doc("", "p", "x")])
    assert standin.requests == []


def test_delete_sources_is_a_refreshed_delete_by_query_in_that_project(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("a1", "a", "x", source="web.md"), doc("a2", "a", "x", source="db.md")])
    engine.upsert([doc("b1", "b", "x", source="web.md")])
    engine.delete_sources("a", ["web.md"])
    (call,) = requests_to(standin, "_delete_by_query")
    assert call.path == f"/{index_name('a')}/_delete_by_query"
    assert call.params["refresh"] == "true" and call.params["conflicts"] == "proceed"
    query = json.loads(call.body)["query"]["bool"]["filter"]
    assert {"term": {"project": "a"}} in query and {"terms": {"source": ["web.md"]}} in query
    assert sorted(standin.docs(index_name("a"))) == ["a2"]
    assert sorted(standin.docs(index_name("b"))) == ["b1"]


def test_delete_chunks_spans_every_project_index(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("a1", "a", "x"), doc("b1", "b", "x"), doc("b2", "b", "x")])
    engine.delete_chunks(["a1", "b1"])
    assert requests_to(standin, "_delete_by_query")[0].path == "/vault-*/_delete_by_query"
    assert engine.count() == 1 and engine.count("b") == 1


def test_delete_on_a_missing_index_is_a_no_op(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.delete_sources("never-indexed", ["x.md"])
    assert requests_to(standin, "_delete_by_query")[0].params["ignore_unavailable"] == "true"


# --- searches ----------------------------------------------------------------------------------


def test_search_forwards_the_callers_jwt_and_filters(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    since = datetime(2024, 1, 1, tzinfo=UTC)
    engine.upsert(
        [
            doc(
                "a1",
                "a",
                "restart runner",
                level=3,
                tags=("ci", "ops"),
                updated_at=datetime(2024, 2, 1, tzinfo=UTC),
                source="runbooks/r.md",
            ),
            doc("a2", "a", "restart runner", level=1),
        ]
    )
    query = LexicalQuery(
        text="restart runner",
        projects=["a", "b"],
        limit=7,
        bearer_token="user-jwt",
        filters=LexicalFilters(
            levels=(3,), source_pattern="runbooks/*", updated_since=since, tags=("ci", "ops")
        ),
    )
    hits = engine.search(query)
    assert [(h.chunk_id, h.project, h.source) for h in hits] == [("a1", "a", "runbooks/r.md")]

    (call,) = requests_to(standin, "_search")
    assert call.authorization == "Bearer user-jwt"
    assert call.path == f"/{index_name('a')},{index_name('b')}/_search"
    assert call.params["ignore_unavailable"] == "true" and call.params["allow_no_indices"] == "true"
    body = json.loads(call.body)
    assert body["size"] == 7
    filters = body["query"]["bool"]["filter"]
    assert {"terms": {"project": ["a", "b"]}} in filters
    assert {"terms": {"level": [3]}} in filters
    assert {"regexp": {"source": {"value": "runbooks\\/.*", "flags": "NONE"}}} in filters
    assert {"range": {"updated_at": {"gte": "2024-01-01T00:00:00+00:00"}}} in filters
    assert {"term": {"tags": "ci"}} in filters and {"term": {"tags": "ops"}} in filters


def test_search_without_a_token_uses_the_service_credentials(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("a1", "a", "hello")])
    assert [h.chunk_id for h in engine.search(LexicalQuery(text="hello", projects=["a"]))] == ["a1"]
    assert requests_to(standin, "_search")[0].authorization == standin.basic_auth


def test_a_refused_token_is_reported(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    with pytest.raises(LexicalUnavailable, match="refused search: 401"):
        engine.search(LexicalQuery(text="hello", projects=["a"], bearer_token="forged"))


def test_a_token_with_line_breaks_is_refused_before_sending(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    with pytest.raises(ValueError, match="line breaks"):
        engine.search(LexicalQuery(text="x", projects=["a"], bearer_token="a\r\nX-Admin: 1"))
    assert requests_to(standin, "_search") == []


def test_search_never_returns_other_projects(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("a1", "a", "secret plan"), doc("b1", "b", "secret plan")])
    assert [h.chunk_id for h in engine.search(LexicalQuery(text="secret", projects=["a"]))] == ["a1"]
    assert engine.search(LexicalQuery(text="secret", projects=[])) == []


def test_huge_query_text_is_bounded(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    text = " ".join(f"w{i}-x" for i in range(30_000)) + "漢" * 50_000
    engine.search(LexicalQuery(text=text, projects=["a"]))
    sent = json.loads(requests_to(standin, "_search")[0].body)["query"]["bool"]["must"][0]["multi_match"][
        "query"
    ]
    assert len(re.findall(r"\w+", sent)) <= MAX_QUERY_TOKENS
    assert bounded_query_text('+ : " AND') == "AND"
    assert bounded_query_text("漢" * 1000) == "漢" * 64  # a long word is cut, not sent whole


# --- counts, health, failures ------------------------------------------------------------------


def test_count_and_health(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    assert engine.count() == 0
    engine.upsert([doc("a1", "a", "x"), doc("a2", "a", "y"), doc("b1", "b", "z")])
    assert engine.count("a") == 2 and engine.count("missing") == 0 and engine.count() == 3
    health = engine.health()
    assert health == {"backend": "opensearch", "docs": 3, "status": "green", "url": standin.url}
    assert any(r.path == "/_cluster/health" for r in standin.requests)


def test_connection_refused_is_lexical_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before use: nothing listens there
    engine = OpenSearchLexicalIndex(f"http://user:pw@127.0.0.1:{port}", timeout_secs=2)
    with pytest.raises(LexicalUnavailable, match="unreachable") as info:
        engine.search(LexicalQuery(text="x", projects=["a"]))
    assert "pw" not in str(info.value)
    with pytest.raises(LexicalUnavailable):
        engine.health()
    with pytest.raises(LexicalUnavailable):
        engine.upsert([doc("c1", "a", "x")])


def test_timeout_is_lexical_unavailable(standin: OpenSearchStandIn) -> None:
    standin.stall = threading.Event()
    engine = OpenSearchLexicalIndex(
        standin.url, user=standin.user, password=standin.password, timeout_secs=0.3
    )
    with pytest.raises(LexicalUnavailable, match="timed out"):
        engine.count()
    standin.stall.set()


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="MEM_OPENSEARCH_URL"):
        OpenSearchLexicalIndex("not a url")


def test_factory_builds_opensearch_when_configured(standin: OpenSearchStandIn) -> None:
    reset_lexical_indexes()
    settings = Settings(
        opensearch_url=standin.url, opensearch_user=standin.user, opensearch_password=standin.password
    )
    index = get_lexical_index(settings)
    assert index.name == "opensearch" and get_lexical_index(settings) is index
    index.upsert([doc("c1", "p", "x")])
    assert index.count("p") == 1
    reset_lexical_indexes()


# --- names and patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "project", ["team-a", "Team-A", "a/b", "a b", "ünï", "*", "..", "_x", "a,b", "x" * 400]
)
def test_index_names_are_valid_and_distinct(project: str) -> None:
    name = index_name(project)
    _check_index_name(name)
    assert name.startswith("vault-")
    assert index_name(project.lower()) != name or project == project.lower()


def test_index_name_rejects_empty() -> None:
    with pytest.raises(ValueError):
        index_name("")


GLOB_PATHS = [
    "runbooks/ci.md",
    "runbooks/a/b.md",
    "skills/a-b.md",
    "v1.2 (draft).md",
    "odd/[x]+y.md",
    "café.md",
    "q/a?b.md",
    "a@b~c<1-2>.md",
]
GLOB_PATTERNS = [
    "runbooks/*",
    "*.md",
    "skills/?-?.md",
    "*[!m]d",
    "v1.2 (*",
    "odd/[[]x]+y.md",
    "caf?.md",
    "[rs]*",
    "q/a[?]b.md",
    "odd/[x",
    "*[a-c]-*",
    "a@b~c<1-2>.md",
    "*<*",
]


@pytest.mark.parametrize("pattern", GLOB_PATTERNS)
def test_lucene_regexp_matches_like_fnmatch(pattern: str) -> None:
    # The emitted regexp uses only `.`, `.*`, classes and backslash-escapes, which mean the same in
    # Python's re, so its full match stands in for Lucene's anchored regexp here.
    rx = re.compile(glob_to_lucene_regexp(pattern))
    for path in GLOB_PATHS:
        assert (rx.fullmatch(path) is not None) == fnmatch.fnmatchcase(path, pattern), (pattern, path)
