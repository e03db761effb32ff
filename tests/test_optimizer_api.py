"""``POST /memory/optimize`` and ``GET /memory/ccr/<hash>`` through the Flask app: CCR round trip, project
isolation, size limit, bad input, every optimizer setting, retrieval mode."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from shared.optimizer.ccr import CCR_MARKER_RE
from tests.conftest import wait_for
from tests.query_corpus import QueryCorpus, query_corpus  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures" / "optimizer"
LOG = (FIXTURES / "pytest_build.log").read_text()
ORDERS = (FIXTURES / "orders.json").read_text()


@pytest.fixture
def client_with(settings: Any) -> Callable[..., FlaskClient]:
    """A test client of an app built with some settings changed (the MEM_* toggles, as parsed)."""
    from api.app import create_app

    def make(**overrides: Any) -> FlaskClient:
        app = create_app(settings.model_copy(update=overrides))
        app.testing = True
        return app.test_client()

    return make


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _optimize(client: FlaskClient, headers: dict[str, str], *chunks: dict[str, Any], **body: Any) -> Any:
    return client.post("/memory/optimize", json={"chunks": list(chunks), **body}, headers=headers)


def _only_chunk(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.get_json()
    chunks = response.get_json()["chunks"]
    assert len(chunks) == 1
    return chunks[0]


# --- round trip and isolation ---------------------------------------------------------------------


def test_compress_then_fetch_the_original_byte_identical(client, make_key, project_name) -> None:
    headers = _headers(make_key(caps=["memory:read"], projects=[project_name]))
    response = _optimize(client, headers, {"id": "ci-log", "text": LOG}, project=project_name)
    body = response.get_json()
    chunk = _only_chunk(response)
    assert body["optimizer"] == "on" and body["project"] == project_name
    assert chunk["id"] == "ci-log" and chunk["type"] == "log" and chunk["reason"] is None
    assert chunk["tokens_after"] < chunk["tokens_before"]
    assert chunk["ratio"] == pytest.approx(chunk["tokens_after"] / chunk["tokens_before"], abs=1e-4)
    assert body["totals"]["tokens_before"] == chunk["tokens_before"]
    assert body["totals"]["tokenizer"] == "cl100k_base"
    marker = CCR_MARKER_RE.search(chunk["text"])
    assert marker is not None and marker.group(1) == chunk["ccr_hash"]
    assert len(chunk["ccr_hash"]) == 29 and chunk["ccr_hash"].isdigit()

    fetched = client.get(f"/memory/ccr/{chunk['ccr_hash']}", headers=headers)
    assert fetched.status_code == 200, fetched.get_json()
    entry = fetched.get_json()
    assert entry["original"].encode("utf-8") == LOG.encode("utf-8")
    assert entry["project"] == project_name and entry["hash"] == chunk["ccr_hash"]
    assert entry["created_at"].endswith("+00:00")


def test_a_caller_who_cannot_see_the_project_gets_the_unknown_hash_answer(client, make_key, project_name) -> None:
    owner = _headers(make_key(caps=["memory:read"], projects=[project_name]))
    stranger = _headers(make_key(caps=["memory:read"], projects=[f"{project_name}-other"]))
    admin = _headers(make_key())
    hash_ = _only_chunk(_optimize(client, owner, {"text": LOG}, project=project_name))["ccr_hash"]

    hidden = client.get(f"/memory/ccr/{hash_}", headers=stranger)
    unknown = client.get(f"/memory/ccr/{'0' * 29}", headers=stranger)
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.get_json()["detail"] == unknown.get_json()["detail"]
    assert client.get(f"/memory/ccr/{hash_}", headers=admin).status_code == 200
    # Storing under a project the caller may not read is refused like reading it.
    refused = _optimize(client, stranger, {"text": LOG}, project=project_name)
    assert refused.status_code == 403


def test_originals_without_a_project_are_for_callers_scoped_to_every_project(client, make_key, project_name) -> None:
    scoped = _headers(make_key(caps=["memory:read"], projects=[project_name]))
    everywhere = _headers(make_key(caps=["memory:read"], projects=None))
    chunk = _only_chunk(_optimize(client, scoped, {"text": LOG}))
    assert client.get(f"/memory/ccr/{chunk['ccr_hash']}", headers=scoped).status_code == 404
    entry = client.get(f"/memory/ccr/{chunk['ccr_hash']}", headers=everywhere)
    assert entry.status_code == 200 and entry.get_json()["project"] is None


def test_hash_shapes(client, admin_headers) -> None:
    # The 24-hex keys of before, other lengths, non-ASCII digits and padding are not hashes.
    for bad in ("zz", "0f3a9c2b7e1d4a6b8c5f2e90", "1" * 28, "1" * 30, "1" * 28 + "a", "١" * 29, "%20" + "1" * 29):
        response = client.get(f"/memory/ccr/{bad}", headers=admin_headers)
        assert response.status_code == 400, bad
        assert response.mimetype == "application/problem+json"
    assert client.get(f"/memory/ccr/{'1' * 29}", headers=admin_headers).status_code == 404
    assert client.get(f"/memory/ccr/{'1' * 29}").status_code == 401


def test_optimizing_needs_read_access(client, make_key) -> None:
    assert _optimize(client, {}, {"text": LOG}).status_code == 401
    writer_only = _headers(make_key(caps=["memory:write"], projects=["p"]))
    assert _optimize(client, writer_only, {"text": LOG}).status_code == 200  # write implies read


# --- limits and bad input -------------------------------------------------------------------------


def test_input_over_the_limit_is_413(client_with, admin_headers) -> None:
    client = client_with(optimizer_max_input_bytes=4096)
    response = _optimize(client, admin_headers, {"text": LOG}, {"text": LOG})
    assert response.status_code == 413
    problem = response.get_json()
    assert "MEM_OPTIMIZER_MAX_INPUT_BYTES" in problem["detail"] and problem["limit_bytes"] == 4096
    big_bytes = base64.b64encode(b"x" * 8192).decode()
    assert _optimize(client, admin_headers, {"base64": big_bytes}).status_code == 413
    assert _optimize(client, admin_headers, {"text": LOG[:2000]}).status_code == 200


@pytest.mark.parametrize(
    ("chunk", "reason"),
    [
        ({"text": '{"orders": [{"id": 1, "status": "ok"}, {"id": 2,}], "page": 1' + " " * 300 + "}"}, "invalid_json"),
        ({"text": "[" * 100_000 + "]" * 100_000, "type": "json"}, "json_too_deep"),
        ({"base64": base64.b64encode(bytes(range(256)) * 20).decode()}, "binary"),
        ({"text": "\x00\x01\x02\x03" * 500}, "binary"),
        ({"text": "The service is the one that is running in the cluster, and it is the one we restart."}, "no_gain"),
        ({"text": "key: value\nother: 2\nthird: [a, b]\n"}, "config_passthrough"),
    ],
    ids=["invalid-json", "deep-nesting", "binary-base64", "binary-text", "tiny", "config"],
)
def test_bad_or_uncompressible_input_passes_through_with_a_reason(client, admin_headers, chunk, reason) -> None:
    out = _only_chunk(_optimize(client, admin_headers, chunk))
    assert out["reason"] == reason
    assert out["ccr_hash"] is None and out["tokens_after"] == out["tokens_before"]
    if "text" in chunk:
        assert out["text"] == chunk["text"]


def test_mixed_encodings_sent_as_base64_are_decoded_line_by_line(client, admin_headers) -> None:
    data = ("\n".join(f"INFO step {n} ok" for n in range(60)) + "\nERROR payment failed: café crème\n").encode()
    data = data.replace("café crème".encode(), "café crème".encode("cp1252")) + "déjà vu ✓\n".encode()
    out = _only_chunk(_optimize(client, admin_headers, {"base64": base64.b64encode(data).decode(), "id": "mixed"}))
    assert out["decode_note"] == "mixed_encoding"
    assert "café crème" in out["text"] and "\ufffd" not in out["text"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"chunks": [{}]},
        {"chunks": [{"text": "a", "base64": "YQ=="}]},
        {"chunks": [{"base64": "not base64!"}]},
        {"chunks": [{"text": "a", "type": "yaml"}]},
        {"chunks": [{"text": "a"}], "budget_tokens": -1},
        {"chunks": [{"text": "a"}], "project": "Not A Project"},
        {"chunks": [{"text": "a"}], "surprise": 1},
        {"query": "why"},
        {"project": "p"},
    ],
)
def test_malformed_requests_are_400_problems(client, admin_headers, body) -> None:
    response = client.post("/memory/optimize", json=body, headers=admin_headers)
    assert response.status_code == 400, response.get_json()
    assert response.mimetype == "application/problem+json" and response.get_json()["detail"]


def test_a_body_that_is_not_utf8_json_is_a_400_not_a_crash(client, admin_headers) -> None:
    for raw in (b'{"chunks": [{"text": "caf\xe9"}]}', b'{"chunks": [{"text": "\\ud800"}]}', b"\xff\xfe{"):
        response = client.post("/memory/optimize", data=raw, content_type="application/json", headers=admin_headers)
        assert response.status_code == 400


# --- settings ---------------------------------------------------------------------------------------


def test_the_mem_variables_reach_the_settings(monkeypatch) -> None:
    from pydantic import ValidationError

    from shared.config import Settings

    env = {"MEM_CONTEXT_OPTIMIZER": "off", "MEM_COMPRESS_JSON": "false", "MEM_COMPRESS_LOGS": "false",
           "MEM_COMPRESS_CODE": "true", "MEM_COMPRESS_DIFF": "false", "MEM_COMPRESS_TEXT": "false",
           "MEM_CCR_ENABLED": "false", "MEM_CCR_MAX_ENTRIES": "7", "MEM_CCR_TTL_SECS": "11"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parsed = Settings()
    assert parsed.context_optimizer == "off" and parsed.ccr_enabled is False
    assert (parsed.compress_json, parsed.compress_logs, parsed.compress_code, parsed.compress_diff,
            parsed.compress_text) == (False, False, True, False, False)
    assert (parsed.ccr_max_entries, parsed.ccr_ttl_secs) == (7, 11)
    monkeypatch.setenv("MEM_CCR_MAX_ENTRIES", "0")
    with pytest.raises(ValidationError, match="ccr_max_entries"):
        Settings()


def test_tokenizer_setting_changes_the_counts_and_is_named(client_with, admin_headers) -> None:
    answers = {name: _optimize(client_with(optimizer_tokenizer=name), admin_headers, {"text": LOG}).get_json()
               for name in ("cl100k_base", "o200k_base", "embedding")}
    assert {name: body["totals"]["tokenizer"] for name, body in answers.items()} == {
        name: name for name in answers}
    # WordPiece cuts the log's paths and hex into more pieces than cl100k does.
    assert answers["embedding"]["totals"]["tokens_before"] > answers["cl100k_base"]["totals"]["tokens_before"]


def test_optimizer_off_returns_every_chunk_unchanged(client_with, admin_headers) -> None:
    client = client_with(context_optimizer="off")
    response = _optimize(client, admin_headers, {"text": LOG}, {"text": ORDERS})
    assert response.status_code == 200
    body = response.get_json()
    assert body["optimizer"] == "off"
    assert [c["text"] for c in body["chunks"]] == [LOG, ORDERS]
    assert {c["reason"] for c in body["chunks"]} == {"optimizer_off"}
    assert all(c["ccr_hash"] is None for c in body["chunks"])


@pytest.mark.parametrize(
    ("setting", "fixture", "kind"),
    [
        ("compress_json", "orders.json", "json"),
        ("compress_logs", "pytest_build.log", "log"),
        ("compress_diff", "change.diff", "diff"),
        ("compress_text", "runbook.md", "text"),
        ("compress_code", "inventory.py", "code"),
    ],
)
def test_each_type_switch(client_with, admin_headers, setting, fixture, kind) -> None:
    text = (FIXTURES / fixture).read_text()
    on = _only_chunk(_optimize(client_with(**{setting: True}), admin_headers, {"text": text, "type": kind}))
    off = _only_chunk(_optimize(client_with(**{setting: False}), admin_headers, {"text": text, "type": kind}))
    assert on["type"] == off["type"] == kind
    assert on["reason"] in (None, "no_gain")
    assert on["tokens_after"] <= on["tokens_before"]
    assert off["reason"] == f"{setting}_off" and off["text"] == text


def test_ccr_disabled_means_no_markers_and_no_originals(client_with, admin_headers) -> None:
    client = client_with(ccr_enabled=False)
    chunk = _only_chunk(_optimize(client, admin_headers, {"text": LOG}))
    assert chunk["reason"] is None and chunk["ccr_hash"] is None
    assert CCR_MARKER_RE.search(chunk["text"]) is None
    assert client.get(f"/memory/ccr/{'2' * 29}", headers=admin_headers).status_code == 404


def test_ccr_capacity_evicts_the_least_recently_used(client_with, admin_headers, project_name) -> None:
    # A capacity no other test uses, so this test gets a store of its own.
    client = client_with(ccr_max_entries=2, ccr_ttl_secs=3599)
    hashes = [_only_chunk(_optimize(client, admin_headers, {"text": f"{LOG}\nrun {n}"}, project=project_name))
              ["ccr_hash"] for n in range(3)]
    status = [client.get(f"/memory/ccr/{h}", headers=admin_headers).status_code for h in hashes]
    assert status == [404, 200, 200]


def test_ccr_entries_expire_after_the_ttl(client_with, admin_headers) -> None:
    client = client_with(ccr_ttl_secs=1, ccr_max_entries=999)
    hash_ = _only_chunk(_optimize(client, admin_headers, {"text": LOG + "\nttl"}))["ccr_hash"]
    assert client.get(f"/memory/ccr/{hash_}", headers=admin_headers).status_code == 200
    wait_for(lambda: client.get(f"/memory/ccr/{hash_}", headers=admin_headers).status_code == 404, timeout=15,
             message="the CCR entry to expire")


def test_redis_down_compresses_without_a_marker_and_reads_are_503(client_with, admin_headers) -> None:
    client = client_with(redis_url="redis://127.0.0.1:1/0")
    chunk = _only_chunk(_optimize(client, admin_headers, {"text": LOG}))
    assert chunk["reason"] == "ccr_unavailable" and chunk["ccr_hash"] is None
    assert chunk["tokens_after"] < chunk["tokens_before"]
    response = client.get(f"/memory/ccr/{'3' * 29}", headers=admin_headers)
    assert response.status_code == 503 and response.headers.get("Retry-After")


def test_budget_leaves_out_trailing_chunks_with_their_original_kept(client, admin_headers) -> None:
    response = _optimize(client, admin_headers, {"id": "first", "text": LOG}, {"id": "second", "text": ORDERS},
                         budget_tokens=1)
    body = response.get_json()
    assert response.status_code == 200
    assert all(c["omitted"] and c["reason"] == "over_budget" and c["text"] == "" for c in body["chunks"])
    assert body["totals"]["omitted"] == 2 and body["totals"]["budget_tokens"] == 1
    original = client.get(f"/memory/ccr/{body['chunks'][1]['ccr_hash']}", headers=admin_headers).get_json()
    assert original["original"] == ORDERS


# --- retrieval mode ---------------------------------------------------------------------------------


def test_query_mode_retrieves_then_optimizes(client, admin_headers, make_key, query_corpus: QueryCorpus) -> None:  # noqa: F811
    response = client.post("/memory/optimize", headers=admin_headers,
                           json={"query": "the pod keeps restarting after it starts", "project": query_corpus.alpha,
                                 "limit": 3})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["retrieval"]["results"] == len(body["chunks"]) > 0
    assert body["retrieval"]["search_method"] in ("hybrid", "semantic", "lexical")
    assert body["chunks"][0]["source"] == "runbooks/pod-crashlooping.md"
    for chunk in body["chunks"]:
        if chunk["ccr_hash"]:
            entry = client.get(f"/memory/ccr/{chunk['ccr_hash']}", headers=admin_headers).get_json()
            assert entry["project"] == query_corpus.alpha

    other_team = _headers(make_key(caps=["memory:read"], projects=[query_corpus.beta]))
    refused = client.post("/memory/optimize", headers=other_team,
                          json={"query": "pod restarting", "project": query_corpus.alpha})
    assert refused.status_code == 403
    unknown = client.post("/memory/optimize", headers=admin_headers,
                          json={"query": "pod restarting", "project": "no-such-project-here"})
    assert unknown.status_code == 400


def test_both_endpoints_are_in_the_openapi_document(client) -> None:
    paths = client.get("/openapi.json").get_json()["paths"]
    assert "post" in paths["/memory/optimize"]
    assert "get" in paths["/memory/ccr/{ccr_hash}"]
