"""``/memory/query`` and ``/with-context`` against the real database, Tantivy index and local embedder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.query_corpus import QueryCorpus, query_corpus  # noqa: F401


def _get(client, headers, **params: Any) -> Any:  # type: ignore[no-untyped-def]
    return client.get("/memory/query", query_string=params, headers=headers)


def _post(client, headers, path: str = "/memory/query", **body: Any) -> Any:  # type: ignore[no-untyped-def]
    return client.post(path, json=body, headers=headers)


def test_hybrid_query_answers_with_route_explanations_facets_and_metrics(client, admin_headers, query_corpus):  # noqa: F811
    r = _get(client, admin_headers, project=query_corpus.alpha, query="the pod keeps restarting after it starts")
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["project"] == query_corpus.alpha
    assert body["search_method"] == "hybrid"
    assert body["route"]["method"] == "hybrid" and body["route"]["reason"]
    assert body["warnings"] == []
    top = body["results"][0]
    assert top["source"] == "runbooks/pod-crashlooping.md"
    assert set(top) >= {"id", "text", "source", "section", "anchor", "level", "breadcrumb", "score", "breakdown"}
    bd = top["breakdown"]
    assert bd["semantic_weight"] == 0.6 and bd["lexical_weight"] == 0.4
    assert top["score"] == pytest.approx(0.6 * bd["semantic"] + 0.4 * bd["lexical"], abs=1e-5)
    assert bd["reason"]
    scores = [item["score"] for item in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert len({item["id"] for item in body["results"]}) == len(body["results"])
    facets = body["facets"]
    assert set(facets) == {"levels", "sources", "months", "tags"}
    assert set(facets["sources"]) <= {"runbooks", "skills", "."}
    assert "kubernetes" in facets["tags"]
    metrics = body["metrics"]
    assert metrics["semantic_engine"] == "pgvector" and metrics["lexical_engine"] == "tantivy"
    for key in ("embed_ms", "semantic_ms", "lexical_ms", "fusion_ms", "total_ms"):
        assert metrics[key] is not None and metrics[key] >= 0
    assert metrics["candidates"]["semantic"] > 0 and metrics["candidates"]["lexical"] > 0


def test_post_body_and_get_query_string_agree(client, admin_headers, query_corpus):  # noqa: F811
    params = {"project": query_corpus.alpha, "query": "redis maxmemory eviction policy", "limit": 3}
    got = _get(client, admin_headers, **params, weights="0.5,0.5").get_json()
    posted = _post(client, admin_headers, **params, weights={"semantic": 0.5, "lexical": 0.5}).get_json()
    assert [r["id"] for r in got["results"]] == [r["id"] for r in posted["results"]]
    assert len(got["results"]) == 3
    assert got["results"][0]["breakdown"]["semantic_weight"] == 0.5


def test_short_identifier_query_routes_lexical(client, admin_headers, query_corpus):  # noqa: F811
    body = _get(client, admin_headers, project=query_corpus.alpha, query="KubePodCrashLooping").get_json()
    assert body["route"]["rule"] == "short-query" and body["search_method"] == "lexical"
    assert body["results"][0]["source"] == "runbooks/pod-crashlooping.md"
    assert body["results"][0]["breakdown"]["semantic_rank"] is None


def test_tag_routes_lexical_with_the_tag_as_filter(client, admin_headers, query_corpus):  # noqa: F811
    body = _get(client, admin_headers, project=query_corpus.alpha, query="#redis what happens when memory is full").get_json()
    assert body["route"]["rule"] == "tag-or-mention"
    assert body["filters"]["tags"] == ["redis"]
    assert body["results"] and all("redis" in r["tags"] for r in body["results"])


def test_explicit_methods_and_rrf(client, admin_headers, query_corpus):  # noqa: F811
    for method in ("semantic", "lexical", "hybrid"):
        body = _get(client, admin_headers, project=query_corpus.alpha, query="undo a release", method=method).get_json()
        assert body["search_method"] == method and body["route"]["rule"] == "explicit"
    body = _post(client, admin_headers, project=query_corpus.alpha, query="roll back the deployment",
                 fusion="rrf").get_json()
    assert body["results"][0]["breakdown"]["fusion"] == "rrf"
    assert body["results"][0]["score"] < 2 / 61 + 1e-9
    body = _get(client, admin_headers, project=query_corpus.alpha, query="roll back", explain="false").get_json()
    assert "breakdown" not in body["results"][0]


def test_filters_level_glob_updated_since_and_tags(client, admin_headers, query_corpus):  # noqa: F811
    alpha = query_corpus.alpha
    q = "what to do when memory runs out"
    for method in ("semantic", "lexical"):
        by_level = _get(client, admin_headers, project=alpha, query=q, method=method, level="1").get_json()
        assert by_level["results"] and {r["level"] for r in by_level["results"]} == {1}
        by_glob = _get(client, admin_headers, project=alpha, query=q, method=method,
                       source_pattern="runbooks/*").get_json()
        assert by_glob["results"] and all(r["source"].startswith("runbooks/") for r in by_glob["results"])
        top_only = _get(client, admin_headers, project=alpha, query=q, method=method,
                        source_pattern="[!r]*.md").get_json()
        assert {r["source"] for r in top_only["results"]} <= {"connection-limits.md", "skills/rollback-deployment.md"}
        tagged = _post(client, admin_headers, project=alpha, query=q, method=method,
                       filters={"tags": ["kubernetes", "deployment"]}).get_json()
        assert tagged["results"] and {r["source"] for r in tagged["results"]} == {"skills/rollback-deployment.md"}
        future = _get(client, admin_headers, project=alpha, query=q, method=method,
                      updated_since="2999-01-01").get_json()
        assert future["results"] == [] and future["facets"]["levels"] == {}
        past = _post(client, admin_headers, project=alpha, query=q, method=method,
                     filters={"updated_since": "2000-01-01T00:00:00Z"}).get_json()
        assert past["results"]
    via_json = _get(client, admin_headers, project=alpha, query=q, filters=json.dumps({"level": [0]})).get_json()
    assert via_json["results"] and {r["level"] for r in via_json["results"]} == {0}
    assert via_json["facets"]["levels"] == {"0": via_json["metrics"]["candidates"]["fused"]}


def test_with_context_carries_neighbours_and_breadcrumb(client, admin_headers, query_corpus):  # noqa: F811
    r = _post(client, admin_headers, "/memory/query/with-context", project=query_corpus.alpha,
              query="kubectl logs previous container exit code 137", method="lexical", limit=1,
              filters={"source_pattern": "runbooks/pod-*"})
    assert r.status_code == 200, r.get_json()
    result = r.get_json()["results"][0]
    assert result["section"] == "Diagnosis"
    ctx = result["context"]
    assert [n["section"] for n in ctx["previous"]] == ["Meaning"]
    assert [n["section"] for n in ctx["next"]] == ["Mitigation"]
    assert ctx["section_title"] == "Diagnosis"
    assert ctx["breadcrumb_full"].startswith(f"{query_corpus.alpha} > runbooks > KubePodCrashLooping")
    assert ctx["breadcrumb_full"].endswith("Diagnosis")
    assert ctx["vault_url"] is None  # no forge configured in tests
    wide = client.get("/memory/query/with-context", headers=admin_headers, query_string={
        "project": query_corpus.alpha, "query": "kubectl logs previous container exit code 137",
        "method": "lexical", "limit": 1, "context_chunks": 3, "source_pattern": "runbooks/pod-*"}).get_json()
    ordinals = [n["ordinal"] for n in wide["results"][0]["context"]["previous"]]
    assert ordinals == sorted(ordinals) and len(ordinals) == 2  # ordinals 0 and 1 precede the Diagnosis chunk


def test_query_that_matches_nothing_is_200_with_route(client, admin_headers, query_corpus):  # noqa: F811
    body = _get(client, admin_headers, project=query_corpus.alpha, query="qqxjz vvkwp").get_json()
    assert body["results"] == []
    assert body["route"]["method"] == "lexical" and body["route"]["reason"]
    assert body["facets"]["levels"] == {}


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \t "}, "empty"),
        ({"limit": 0}, "limit"),
        ({"limit": 10**6}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"method": "fuzzy"}, "method"),
        ({"fusion": "borda"}, "fusion"),
        ({"weights": "0.7,0.7"}, "sum to 1"),
        ({"weights": "0.7"}, "weights"),
        ({"weights": "a,b"}, "weights"),
        ({"level": "7"}, "level"),
        ({"level": "x"}, "level"),
        ({"updated_since": "yesterday"}, "updated_since"),
        ({"filters": "{not json"}, "JSON"),
        ({"filters": "[1]"}, "JSON object"),
        ({"filters": '{"colour": "red"}'}, "colour"),
        ({"candidates": 0}, "candidates"),
        ({"query": "x" * 100_000}, "query"),
        ({"query": "x" * 102_400}, "too long"),
        ({"project": "Not A Project!"}, "project"),
    ],
)
def test_bad_query_string_is_a_400_problem(client, admin_headers, query_corpus, params, needle):  # noqa: F811
    args = {"project": query_corpus.alpha, "query": "pod restarts", **params}
    r = client.get("/memory/query", query_string=args, headers=admin_headers)
    assert r.status_code == 400, r.get_json()
    assert r.mimetype == "application/problem+json"
    assert needle.lower() in r.get_json()["detail"].lower()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"query": " "}, "empty"),
        ({"limit": 0}, "limit"),
        ({"limit": 1_000_000}, "limit"),
        ({"method": "psychic"}, "method"),
        ({"weights": {"semantic": 0.9, "lexical": 0.3}}, "sum to 1"),
        ({"weights": {"semantic": 1.5, "lexical": -0.5}}, "weights"),
        ({"filters": {"level": "one"}}, "level"),
        ({"filters": {"tags": "redis"}}, "tags"),
        ({"filters": {"source_pattern": ""}}, "source_pattern"),
        ({"filters": {"updated_since": "soon"}}, "updated_since"),
        ({"filters": []}, "filters"),
        ({"query": "y" * 102_400}, "query"),
        ({"unexpected": 1}, "unexpected"),
        ({"context_chunks": 2}, "context_chunks"),
    ],
)
def test_bad_json_body_is_a_400_problem(client, admin_headers, query_corpus, body, needle):  # noqa: F811
    r = client.post("/memory/query", json={"project": query_corpus.alpha, "query": "pod restarts", **body},
                    headers=admin_headers)
    assert r.status_code == 400, r.get_json()
    assert r.mimetype == "application/problem+json"
    assert needle.lower() in r.get_json()["detail"].lower()


def test_unknown_project_for_an_all_projects_caller_is_400(client, admin_headers, database):
    r = _get(client, admin_headers, project="no-such-project-here", query="pod restarts")
    assert r.status_code == 400
    assert "unknown project" in r.get_json()["detail"]


def test_scoped_key_never_sees_another_project(client, make_key, query_corpus):  # noqa: F811
    alpha, beta = query_corpus.alpha, query_corpus.beta
    headers = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[alpha])}"}
    for project in (beta, "no-such-project-here"):
        r = _get(client, headers, project=project, query="too many clients already")
        assert r.status_code == 403
        assert r.get_json()["detail"] == f"no access to project '{project}' (or it does not exist)"
    # The same wording lives in both projects: only alpha's chunk may come back, and only alpha's facets.
    for method in ("hybrid", "semantic", "lexical"):
        body = _get(client, headers, project=alpha, query="FATAL: sorry, too many clients already",
                    method=method, limit=100, candidates=500).get_json()
        assert body["results"], method
        assert {r["project"] for r in body["results"]} == {alpha}
        assert "secret" not in body["facets"]["tags"]
        assert all("zebrafish" not in r["text"].lower() for r in body["results"])
    body = _get(client, headers, project=alpha, query="zebrafish protocol aquarium feeding").get_json()
    assert all(r["project"] == alpha for r in body["results"])
    no_read = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[])}"}
    assert _get(client, no_read, project=alpha, query="pods").status_code == 403
    assert client.get("/memory/query", query_string={"project": alpha, "query": "pods"}).status_code == 401


def test_openapi_documents_the_query_endpoints(client, query_corpus):  # noqa: F811
    doc = client.get("/openapi.json").get_json()
    assert {"get", "post"} <= set(doc["paths"]["/memory/query"])
    assert {"get", "post"} <= set(doc["paths"]["/memory/query/with-context"])


def test_mem_query_cli_runs_in_process(query_corpus):  # noqa: F811
    from click.testing import CliRunner

    import cli.query  # noqa: F401 - attaches the command
    from cli.app import mem

    result = CliRunner().invoke(mem, ["query", "KubePodCrashLooping", "--project", query_corpus.alpha])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    assert "runbooks/pod-crashlooping.md" in result.output
    assert "short-query" in result.stderr
    as_json = CliRunner().invoke(mem, ["query", "how do I undo a bad release", "-p", query_corpus.alpha,
                                       "--json", "--context", "1", "--since", "2000-01-01"])
    assert as_json.exit_code == 0, as_json.stderr
    body = json.loads(as_json.output)
    assert body["search_method"] == "hybrid" and "context" in body["results"][0]
    for args, needle in ((["--weights", "0.9,0.9"], "sum to 1"), (["--since", "soon"], "ISO 8601"),
                         (["--project", "no-such-project-here"], "unknown project")):
        bad = CliRunner().invoke(mem, ["query", "pods restarting often", "-p", query_corpus.alpha, *args])
        assert bad.exit_code == 2 and needle in bad.output + bad.stderr, bad.output + bad.stderr


def test_identifier_aware_and_typo_tolerant_lexical_matching(client, admin_headers, query_corpus):  # noqa: F811
    def top(query: str) -> str:
        body = _get(client, admin_headers, project=query_corpus.alpha, query=query, method="lexical").get_json()
        assert body["results"], query
        return body["results"][0]["source"]

    # The alert name's words (split from the CamelCase name in the index) and a mistyped name both find it.
    assert top("kube pod crash looping") == "runbooks/pod-crashlooping.md"
    assert top("KubePodCrashLoping") == "runbooks/pod-crashlooping.md"
    assert top("back off") == "runbooks/pod-crashlooping.md"  # from CrashLoopBackOff in the text
