"""The OpenSearch backend's REST calls, checked against a real HTTP stand-in of the documented API."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.config import Settings
from shared.search import opensearch_index, tantivy_index
from shared.search.lexical import LexicalDoc, LexicalFilters, LexicalQuery, LexicalUnavailable
from shared.search.lexical_factory import get_lexical_index, reset_lexical_indexes
from shared.search.opensearch_index import (
    ALL_INDICES,
    FUZZY_FIELD,
    INDEX_BODY,
    MAPPING_VERSION,
    MAX_QUERY_TOKENS,
    OpenSearchLexicalIndex,
    bounded_query_text,
    glob_to_lucene_regexp,
    index_name,
)
from tests.opensearch_standin import (
    OpenSearchStandIn,
    Recorded,
    _check_index_name,
    analyzer_for,
    fuzzy_edits,
    serve,
)

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


def field_mapping(name: str, body: dict[str, Any] = INDEX_BODY) -> dict[str, Any]:
    """The mapping of the (sub)field ``name`` (``content.stemmed``) in an index-creation body."""
    top, _, sub = name.partition(".")
    spec = body["mappings"]["properties"][top]
    return spec["fields"][sub] if sub else spec


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
    # snake_case words cost a term per part: the analyzer splits them, and the clause limit counts terms.
    text = " ".join(f"w{i}-x_y.z" for i in range(30_000)) + "漢" * 50_000
    engine.search(LexicalQuery(text=text, projects=["a"]))
    mm = multi_match(sent_query(standin))
    for entry in mm["fields"]:
        analyze = analyzer_for(INDEX_BODY, field_mapping(entry.partition("^")[0])["analyzer"])
        assert MAX_QUERY_TOKENS - 3 < len(analyze(mm["query"])) <= MAX_QUERY_TOKENS, entry
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
    stemmed = field_mapping("content.stemmed")["analyzer"]
    assert mappings["properties"]["identifier_parts"] == {"type": "text", "analyzer": stemmed}
    assert stemmed in json.loads(create.body)["settings"]["analysis"]["analyzer"]


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
        # Tantivy analyses every searched field with en_stem; the OpenSearch rebuild of it is one analyzer.
        assert field_mapping(name)["analyzer"] == opensearch_index.STEMMED_ANALYZER, name
        weights[name.partition(".")[0]] = float(boost or 1.0)
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
        assert field.split(".")[0] in tantivy_index.FUZZY_FIELDS and field == "content.stemmed"
        assert field_mapping(field)["analyzer"] == opensearch_index.STEMMED_ANALYZER
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
    english = {"type": "text", "analyzer": "english"}
    legacy_props["content"] = {"type": "text", "analyzer": "standard", "fields": {"english": english}}
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


# --- analysis: Tantivy's en_stem rebuilt from OpenSearch's parts ---------------------------------


def stemmed_analyzer_name() -> str:
    """The analyzer the mapping names for the stemmed chunk text."""
    return field_mapping("content.stemmed")["analyzer"]


def found(engine: OpenSearchLexicalIndex, text: str) -> list[str]:
    """The chunk ids ``text`` finds in project ``p``, best first."""
    return [h.chunk_id for h in engine.search(LexicalQuery(text=text, projects=["p"]))]


def test_searched_and_fuzzy_fields_use_the_en_stem_chain_at_index_and_search_time(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert([doc("c1", "p", "x")])
    engine.search(LexicalQuery(text="x y", projects=["p"], fuzzy=("mistyped",)))
    bool_q = sent_query(standin)
    mm = multi_match(bool_q)
    (fuzzy,) = [c["constant_score"]["filter"]["match"] for c in bool_q["should"] if "constant_score" in c]
    fields = [entry.partition("^")[0] for entry in mm["fields"]] + list(fuzzy)
    assert set(fields) == {"content.stemmed", "identifier_parts"} and FUZZY_FIELD in fields
    name = stemmed_analyzer_name()
    for fname in fields:
        # No search_analyzer and no per-query analyzer: the query text goes through the indexing chain.
        assert field_mapping(fname) == {"type": "text", "analyzer": name}, fname
    assert "analyzer" not in mm and all("analyzer" not in spec for spec in fuzzy.values())

    (create,) = [r for r in standin.requests if r.method == "PUT"]
    analysis = json.loads(create.body)["settings"]["analysis"]
    definition = analysis["analyzer"][name]
    assert definition["type"] == "custom" and set(definition) == {"type", "tokenizer", "filter"}
    # simple tokenizer: a token is a run of characters Rust's char::is_alphanumeric accepts.
    assert analysis["tokenizer"][definition["tokenizer"]] == {
        "type": "pattern",
        "pattern": r"[^\p{IsAlphabetic}\p{N}]+",
    }
    chain = [analysis["filter"].get(f, f) for f in definition["filter"]]
    # remove_long(40), then lower_caser, then stemmer(English): no stop word filter, no possessive filter.
    assert chain == [
        {"type": "length", "max": 39},
        "lowercase",
        {"type": "snowball", "language": "English"},
    ]


def test_snake_case_and_dotted_names_are_found_by_their_words(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    engine.upsert(
        [
            doc("pool", "p", "Raise max_connections on the pooler"),
            doc("api", "p", "kube.apiserver answers slowly"),
            doc("dash", "p", "node-exporter scrapes fail"),
            doc("other", "p", "nothing relevant here"),
        ]
    )
    assert found(engine, "max connections") == ["pool"]
    assert found(engine, "apiserver") == ["api"]
    assert found(engine, "exporter") == ["dash"]
    # And the whole name still finds them: the query is split the same way.
    assert found(engine, "kube.apiserver") == ["api"]


def test_stop_words_stay_searchable(standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex) -> None:
    engine.upsert([doc("ready", "p", "The probe is ready"), doc("not", "p", "The probe is not ready")])
    hits = engine.search(LexicalQuery(text="not ready", projects=["p"]))
    assert [h.chunk_id for h in hits] == ["not", "ready"] and hits[0].score > hits[1].score
    assert found(engine, "not") == ["not"]


def test_stemming_is_snowball_english_not_porter(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex
) -> None:
    # Words the two stemmers treat differently: porter2 stems "dying" to "die" (Porter: "dy") and keeps
    # "generic" apart from "general" (Porter: both "gener").
    engine.upsert([doc("dying", "p", "The worker keeps dying"), doc("generic", "p", "A generic retry")])
    assert found(engine, "die") == ["dying"]
    assert found(engine, "general") == []


def test_the_builtin_english_analyzer_would_miss_these(
    standin: OpenSearchStandIn, engine: OpenSearchLexicalIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same searches on an index whose stemmed fields use `english`: the tests above would fail on it,
    # so they show the analyzer, not only the query shape.
    english = copy.deepcopy(INDEX_BODY)
    english["mappings"]["properties"]["content"]["fields"]["stemmed"]["analyzer"] = "english"
    english["mappings"]["properties"]["identifier_parts"]["analyzer"] = "english"
    monkeypatch.setattr(opensearch_index, "INDEX_BODY", english)
    engine.upsert(
        [
            doc("pool", "p", "Raise max_connections on the pooler"),
            doc("not", "p", "The probe is not ready"),
            doc("dying", "p", "The worker keeps dying"),
        ]
    )
    assert found(engine, "max connections") == []
    assert found(engine, "not") == []
    assert found(engine, "die") == []


# Strings the two chains must analyse alike: prose, identifiers of every shape, numbers, punctuation,
# 39- and 40-character ASCII tokens, and the Unicode cases where "alphanumeric" is subtle (combining
# vowel signs and circled letters are Alphabetic without being letters; a combining acute is neither;
# superscripts and Roman numerals are numbers; a final capital sigma lowercases to σ, not ς).
PARITY_SAMPLES = [
    "The probe is not ready; no replicas are available.",
    "Connections were refused while the pooler restarted",
    "max_connections kube.apiserver node-exporter KubePodCrashLooping etcdServerDown",
    "E0308: mismatched types at src/main.rs:42:7 (exit code 137, OOMKilled)",
    "GET /api/v1/namespaces?limit=500 HTTP/1.1 -> 503 after 30s",
    "10.0.0.1:8080 v1.2.3-rc.1 0x7fff5fbff8c0 sha256:9f86d081884c7d65",
    "the node's disk pressure isn't the kubelet's fault",
    "x" * 39 + " " + "y" * 40 + " " + "z" * 41 + " ok",
    "naïve café Größe straße Ærø",
    "ΟΔΟΣ Αθήνα ΕΛΛΑΔΑ",
    "हिन्दी தமிழ் ⓐⓑⓒ x\u0301y a²b Ⅻ 日本語テキスト 東京 한국어",
    "emoji🔥split — em-dash «quotes» tab\tnewline\nend",
    "",
]
# Where the chains differ, for want of other parts in OpenSearch (docs/architecture.md): the length filter
# counts characters, Tantivy's remove_long UTF-8 bytes; Lucene lowercases each code point by the simple
# mapping (İ -> i), Tantivy by Rust's full mapping (İ -> i + combining dot above).
KNOWN_DIFFERENCES = ["é" * 20, "İstanbul"]


def test_the_stemmed_analyzer_makes_tantivys_terms() -> None:
    """The parity claim: on every sample the analyzer the mapping names makes Tantivy's en_stem terms.

    The stand-in runs the index body's analysis definitions with Python's `regex` and libstemmer, not
    with Lucene: this shows the definitions describe Tantivy's chain, not that a cluster runs them
    identically. A JDK's Unicode tables, the Snowball release Lucene compiled in, and java.util.regex's
    reading of the pattern could each differ; against a real cluster the _analyze test below settles it.
    """
    tantivy = tantivy_index._en_stem_analyzer()
    for field in ("content.stemmed", "identifier_parts"):
        opensearch = analyzer_for(INDEX_BODY, field_mapping(field)["analyzer"])
        for sample in PARITY_SAMPLES:
            assert opensearch(sample) == tantivy.analyze(sample), (field, sample)
    opensearch = analyzer_for(INDEX_BODY, stemmed_analyzer_name())
    for sample in KNOWN_DIFFERENCES:
        assert opensearch(sample) != tantivy.analyze(sample), sample


@pytest.mark.skipif(not os.environ.get("MEM_OPENSEARCH_URL"), reason="MEM_OPENSEARCH_URL is not set")
def test_a_real_cluster_makes_tantivys_terms() -> None:
    """The same samples through a real cluster's ``_analyze`` on an index created with INDEX_BODY."""
    from opensearchpy import OpenSearch

    settings = Settings()
    user, password = settings.opensearch_user, settings.opensearch_password or ""
    client = OpenSearch(
        hosts=[settings.opensearch_url],
        http_auth=(user, password) if user else None,
        verify_certs=settings.opensearch_verify_certs,
    )
    # Outside INDEX_PREFIX, so no engine call (a delete over every project index) can reach it.
    name = f"poimen-analysis-parity-{uuid.uuid4().hex[:12]}"
    client.indices.create(index=name, body=INDEX_BODY)
    try:
        tantivy = tantivy_index._en_stem_analyzer()
        for sample in [s for s in PARITY_SAMPLES if s]:
            body = {"analyzer": stemmed_analyzer_name(), "text": sample}
            terms = [t["token"] for t in client.indices.analyze(index=name, body=body)["tokens"]]
            assert terms == tantivy.analyze(sample), sample
    finally:
        client.indices.delete(index=name)


# Index bodies a real cluster refuses (or the stand-in cannot run), one flaw each.
def _broken_bodies() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []

    def case(label: str, change: Any) -> None:
        body = copy.deepcopy(INDEX_BODY)
        change(body["settings"]["analysis"], body["mappings"]["properties"])
        cases.append((label, body))

    analysis = INDEX_BODY["settings"]["analysis"]
    tokenizer = next(iter(analysis["tokenizer"]))
    analyzer = next(iter(analysis["analyzer"]))
    length = next(n for n, f in analysis["filter"].items() if f["type"] == "length")
    stem = next(n for n, f in analysis["filter"].items() if f["type"] == "snowball")
    case("unknown tokenizer type", lambda a, p: a["tokenizer"][tokenizer].update(type="patern"))
    case("undocumented tokenizer parameter", lambda a, p: a["tokenizer"][tokenizer].update(regex="x"))
    case("unknown regex flag", lambda a, p: a["tokenizer"][tokenizer].update(flags="UNICODE"))
    case("pattern that does not compile", lambda a, p: a["tokenizer"][tokenizer].update(pattern="[^a"))
    case("length max as a string", lambda a, p: a["filter"][length].update(max="39"))
    case("length min above max", lambda a, p: a["filter"][length].update(min=50))
    case("undocumented snowball language", lambda a, p: a["filter"][stem].update(language="Porter2"))
    case("undefined filter", lambda a, p: a["analyzer"][analyzer]["filter"].append("poimen_missing"))
    case("filter not a list", lambda a, p: a["analyzer"][analyzer].update(filter="lowercase"))
    case("no tokenizer", lambda a, p: a["analyzer"][analyzer].pop("tokenizer"))
    case("undefined tokenizer", lambda a, p: a["analyzer"][analyzer].update(tokenizer="poimen_missing"))
    case("undefined analyzer in mapping", lambda a, p: p["identifier_parts"].update(analyzer="poimen_x"))
    case(
        "search_analyzer alone",
        lambda a, p: p["identifier_parts"].update(search_analyzer=p["identifier_parts"].pop("analyzer")),
    )
    case("analyzer on a keyword", lambda a, p: p["source"].update(analyzer="standard"))
    return cases


@pytest.mark.parametrize(("label", "body"), _broken_bodies(), ids=[label for label, _ in _broken_bodies()])
def test_the_standin_refuses_malformed_analysis(
    standin: OpenSearchStandIn,
    engine: OpenSearchLexicalIndex,
    label: str,
    body: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(opensearch_index, "INDEX_BODY", body)
    with pytest.raises(LexicalUnavailable, match="400"):
        engine.upsert([doc("c1", "p", "x")])
    assert len(standin.violations) == 1, (label, standin.violations)
    assert index_name("p") not in standin.indices
    standin.violations.clear()  # expected here; the fixture fails on any other


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
