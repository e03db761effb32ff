"""The OpenSearch backend's REST calls, checked against a real HTTP stand-in of the documented API."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.config import Settings
from shared.search import tantivy_index
from shared.search.lexical import LexicalDoc, LexicalFilters, LexicalQuery, LexicalUnavailable
from shared.search.lexical_factory import get_lexical_index, reset_lexical_indexes
from shared.search.opensearch_index import (
    ALL_INDICES,
    INDEX_BODY,
    MAPPING_VERSION,
    MAX_QUERY_TOKENS,
    OpenSearchLexicalIndex,
    bounded_query_text,
    glob_to_lucene_regexp,
    index_name,
)
from tests.opensearch_standin import OpenSearchStandIn, Recorded, _check_index_name, fuzzy_edits, serve

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


def sent_query(st: OpenSearchStandIn, nth: int = -1) -> dict[str, Any]:
    """The ``bool`` query of the ``nth`` recorded ``_search``."""
    return json.loads(requests_to(st, "_search")[nth].body)["query"]["bool"]


def multi_match(bool_q: dict[str, Any]) -> dict[str, Any]:
    """The one ``multi_match`` of a sent bool query."""
    (mm,) = [c["multi_match"] for c in bool_q.get("must", []) + bool_q.get("should", []) if "multi_match" in c]
    return mm


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
    assert requests_to(standin, "_delete_by_query")[0].path == f"/{ALL_INDICES}/_delete_by_query"
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
    sent = multi_match(sent_query(standin))["query"]
    assert len(re.findall(r"\w+", sent)) <= MAX_QUERY_TOKENS
    assert bounded_query_text('+ : " AND') == "AND"
    assert bounded_query_text("漢" * 1000) == "漢" * 64  # a long word is cut, not sent whole


# --- parity with Tantivy: identifier words, field weights, typo tolerance -----------------------


def test_index_mapping_is_versioned_and_has_the_identifier_field(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("c1", "p", "x")])
    (create,) = [r for r in standin.requests if r.method == "PUT"]
    assert create.path == f"/{index_name('p')}" and f"_v{MAPPING_VERSION}-" in create.path
    mappings = json.loads(create.body)["mappings"]
    assert mappings["_meta"] == {"poimen_mapping_version": MAPPING_VERSION}
    assert mappings["properties"]["identifier_parts"] == {"type": "text", "analyzer": "english"}


def test_upsert_sends_the_camel_case_words_of_identifiers(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert(
        [
            doc("c1", "p", "Alert KubePodCrashLooping fires; etcdServerDown too; max_connections is fine"),
            doc("c2", "p", "plain words only"),
        ]
    )
    stored = standin.docs(index_name("p"))
    assert stored["c1"]["identifier_parts"] == "Kube Pod Crash Looping etcd Server Down"
    assert stored["c2"]["identifier_parts"] == ""


def test_the_words_of_an_identifier_find_it(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    engine.upsert(
        [
            doc("alert", "p", "KubePodCrashLooping fired in staging"),
            doc("cart", "p", "the crash cart is in the hall"),
        ]
    )
    hits = engine.search(LexicalQuery(text="pod crash looping", projects=["p"]))
    assert [h.chunk_id for h in hits] == ["alert", "cart"]


def test_searched_fields_and_weights_are_tantivys(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("c1", "p", "x")])
    engine.search(LexicalQuery(text="x", projects=["p"]))
    weights: dict[str, float] = {}
    for entry in multi_match(sent_query(standin))["fields"]:
        name, _, boost = entry.partition("^")
        top, _, sub = name.partition(".")
        spec = INDEX_BODY["mappings"]["properties"][top]
        # Tantivy analyses every searched field with its English stemmer (en_stem).
        assert (spec["fields"][sub] if sub else spec)["analyzer"] == "english", name
        weights[top] = float(boost or 1.0)
    assert weights == {f.name: f.boost for f in tantivy_index.TEXT_FIELDS}
    assert all(f.tokenizer == "en_stem" for f in tantivy_index.TEXT_FIELDS)


def test_fuzzy_words_become_constant_score_clauses_scored_as_in_tantivy(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    words = ("KubePodCrashLoopng", "OOM", "E0308", "kubepodcrashloopng", *(f"Ident{i}Name" for i in range(12)))
    engine.search(
        LexicalQuery(text="KubePodCrashLoopng", projects=["p"], fuzzy=words, filters=LexicalFilters(levels=(2,)))
    )
    bool_q = sent_query(standin)
    assert bool_q["minimum_should_match"] == 1
    assert {"terms": {"level": [2]}} in bool_q["filter"]
    clauses = [c["constant_score"] for c in bool_q["should"] if "constant_score" in c]
    assert len(clauses) == tantivy_index.MAX_FUZZY_TERMS
    sent = []
    for clause in clauses:
        assert clause["boost"] == tantivy_index.FUZZY_BOOST
        ((field, spec),) = clause["filter"]["match"].items()
        assert field.split(".")[0] in tantivy_index.FUZZY_FIELDS and field == "content.english"
        assert spec["fuzzy_rewrite"] == "constant_score" and spec["prefix_length"] == 0
        assert spec["fuzzy_transpositions"] is True  # tantivy counts a transposition as one edit
        # Tantivy: one edit, two for terms of 10+ characters; shorter terms are never sent.
        for n in range(tantivy_index.MIN_FUZZY_CHARS, 30):
            assert fuzzy_edits(spec["fuzziness"], "x" * n) == (2 if n >= 10 else 1), n
        sent.append(spec["query"])
    # Short words are left out (as Tantivy leaves out short terms), repeats once, in query order.
    assert sent[:2] == ["KubePodCrashLoopng", "E0308"]
    assert "OOM" not in sent and len({w.lower() for w in sent}) == len(sent)


def test_a_mistyped_identifier_finds_its_runbook_only_with_fuzzy(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert(
        [doc("runbook", "p", "KubePodCrashLooping: the pod restarts again"), doc("other", "p", "disk full")]
    )
    typo = "KubePodCrashLoopng"
    assert engine.search(LexicalQuery(text=typo, projects=["p"])) == []
    hits = engine.search(LexicalQuery(text=typo, projects=["p"], fuzzy=(typo,)))
    assert [(h.chunk_id, h.score) for h in hits] == [("runbook", tantivy_index.FUZZY_BOOST)]
    # Exact words still outrank a typo match by more than the constant fuzzy score.
    both = engine.search(LexicalQuery(text="pod restarts " + typo, projects=["p"], fuzzy=(typo,)))
    assert [h.chunk_id for h in both] == ["runbook"] and both[0].score > tantivy_index.FUZZY_BOOST


def test_filters_alone_never_match(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    engine.upsert([doc("c1", "p", "disk full", level=2)])
    query = LexicalQuery(text="nothing related", projects=["p"], filters=LexicalFilters(levels=(2,)))
    assert engine.search(query) == []
    assert engine.search(LexicalQuery(text="nothing related", projects=["p"], fuzzy=("unrelated",))) == []


def _legacy_index(standin: OpenSearchStandIn, project: str, chunk_id: str) -> str:
    """A mapping-version-1 index of ``project`` holding one chunk, as an older release left it."""
    name = "vault-" + project
    legacy_props = {k: v for k, v in INDEX_BODY["mappings"]["properties"].items() if k != "identifier_parts"}
    source = {
        "chunk_id": chunk_id,
        "project": project,
        "source": "runbooks/old.md",
        "breadcrumb": "",
        "section": "",
        "content": "restart the runner",
        "level": 1,
        "tags": [],
        "updated_at": None,
    }
    standin.indices[name] = {"mapping": {"dynamic": "strict", "properties": legacy_props}, "docs": {chunk_id: source}}
    return name


def test_indices_of_the_old_mapping_are_neither_searched_nor_touched(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    legacy = _legacy_index(standin, "p", "old")
    engine.upsert([doc("new", "p", "restart the runner")])
    assert [h.chunk_id for h in engine.search(LexicalQuery(text="restart", projects=["p"]))] == ["new"]
    engine.delete_chunks(["old", "new"])
    engine.delete_sources("p", ["runbooks/old.md"])
    assert engine.count() == 0 and engine.count("p") == 0
    assert list(standin.docs(legacy)) == ["old"]
    assert all(legacy not in r.path for r in standin.requests)


def test_reindex_lexical_rebuilds_a_project_into_the_new_index(
    standin: OpenSearchStandIn, settings: Settings, project_name: str
) -> None:
    # The documented upgrade path: the chunk rows in PostgreSQL are the truth; reindex_lexical fills the
    # versioned index from them and leaves the old index alone (to be deleted by the operator).
    from shared.db.engine import session_scope
    from shared.db.models import ChunkRow, Document, Project
    from shared.evaluation.corpus import reindex_lexical

    texts = ["KubePodCrashLooping: the pod restarts again", "Check the node's disk pressure first"]
    with session_scope() as session:
        project = Project(name=project_name)
        session.add(project)
        session.flush()
        document = Document(project_id=project.id, path="runbooks/pods.md", content_sha="0" * 64, title="Pods")
        session.add(document)
        session.flush()
        for i, text in enumerate(texts):
            session.add(
                ChunkRow(
                    id=f"{project_name}-{i}",
                    document_id=document.id,
                    project_id=project.id,
                    source="runbooks/pods.md",
                    ordinal=i,
                    level=1,
                    breadcrumb="runbooks > Pods",
                    section_title="Pods",
                    anchor="pods",
                    text=text,
                    token_count=len(text.split()),
                    start_line=i + 1,
                    end_line=i + 1,
                    text_sha=hashlib.sha256(text.encode()).hexdigest(),
                    tags=[],
                )
            )
    legacy = _legacy_index(standin, project_name, "old")
    os_settings = settings.model_copy(
        update={"opensearch_url": standin.url, "opensearch_user": standin.user, "opensearch_password": standin.password}
    )
    reset_lexical_indexes()
    try:
        assert reindex_lexical(project_name, os_settings) == 2
        engine = get_lexical_index(os_settings)
        assert engine.name == "opensearch" and engine.count(project_name) == 2
        hits = engine.search(LexicalQuery(text="pod crash looping", projects=[project_name]))
        assert hits[0].chunk_id == f"{project_name}-0"
        stored = standin.docs(index_name(project_name))
        assert stored[f"{project_name}-0"]["identifier_parts"] == "Kube Pod Crash Looping"
        assert list(standin.docs(legacy)) == ["old"]
    finally:
        reset_lexical_indexes()


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
    assert fnmatch.fnmatchcase(name, ALL_INDICES)
    assert not fnmatch.fnmatchcase(name, "vault-*")  # the mapping-version-1 names, left to be deleted
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
