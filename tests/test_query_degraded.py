"""Degraded engines: a dead lexical engine, a missing, hanging or broken embedder. Never a 500."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.query_corpus import QueryCorpus, query_corpus  # noqa: F401

QUESTION = "the pod keeps restarting after it starts"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddingStandIn:
    """A real OpenAI-compatible ``/v1/embeddings`` server: it hangs (until released) or answers with
    vectors of a fixed dimension."""

    def __init__(self, mode: str, dim: int = 3) -> None:
        self.release = threading.Event()
        self.requests = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                stand_in.requests += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if mode == "hang":
                    stand_in.release.wait(30)
                    self.send_response(503)
                    self.end_headers()
                    return
                texts = body.get("input") or []
                data = [{"index": i, "embedding": [1.0] + [0.0] * (dim - 1)} for i, _ in enumerate(texts)]
                payload = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def make_client(settings) -> Iterator[Any]:  # type: ignore[no-untyped-def]
    """A test client of an app built with the given settings changes."""
    from api.app import create_app
    from shared.search.lexical_factory import reset_lexical_indexes
    from shared.search.query import reset_query_state

    def make(**changes: Any) -> Any:
        app = create_app(settings.model_copy(update=changes))
        app.testing = True
        return app.test_client()

    yield make
    reset_query_state()
    reset_lexical_indexes()


@pytest.fixture
def stand_ins() -> Iterator[list[EmbeddingStandIn]]:
    servers: list[EmbeddingStandIn] = []
    yield servers
    for server in servers:
        server.close()


def _dead_opensearch() -> dict[str, Any]:
    return {"lexical_backend": "opensearch", "opensearch_url": f"http://127.0.0.1:{_closed_port()}",
            "opensearch_timeout_secs": 2.0}


def test_dead_lexical_engine_answers_from_pgvector_with_a_warning(make_client, admin_headers, query_corpus):  # noqa: F811
    client = make_client(**_dead_opensearch())
    r = client.get("/memory/query", headers=admin_headers, query_string={"project": query_corpus.alpha,
                                                                          "query": QUESTION})
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["route"]["method"] == "hybrid"
    assert body["search_method"] == "semantic"
    assert body["results"] and body["results"][0]["source"] == "runbooks/pod-crashlooping.md"
    assert any("lexical engine failed" in w for w in body["warnings"])
    assert body["results"][0]["breakdown"]["lexical_rank"] is None


def test_unusable_tantivy_directory_degrades_too(make_client, admin_headers, query_corpus, tmp_path):  # noqa: F811
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the index directory should be")
    client = make_client(lexical_backend="tantivy", data_dir=blocked)
    body = client.get("/memory/query", headers=admin_headers,
                      query_string={"project": query_corpus.alpha, "query": QUESTION}).get_json()
    assert body["search_method"] == "semantic" and body["results"]
    assert any("tantivy" in w for w in body["warnings"])


def test_no_embedder_routes_lexical_with_a_warning(make_client, admin_headers, query_corpus):  # noqa: F811
    client = make_client(embedder="none")
    body = client.get("/memory/query", headers=admin_headers,
                      query_string={"project": query_corpus.alpha, "query": QUESTION}).get_json()
    assert body["route"] == {"method": "lexical", "rule": "embedder-down",
                             "reason": "the embedder is unavailable: answering from the lexical engine alone"}
    assert body["search_method"] == "lexical" and body["results"]
    assert body["warnings"] and "unavailable" in body["warnings"][0]
    explicit = client.get("/memory/query", headers=admin_headers, query_string={
        "project": query_corpus.alpha, "query": QUESTION, "method": "semantic"}).get_json()
    assert explicit["search_method"] == "lexical" and explicit["results"]
    assert any("answering from the lexical engine" in w for w in explicit["warnings"])


def test_hanging_embedder_times_out_and_routes_lexical(make_client, admin_headers, query_corpus, stand_ins):  # noqa: F811
    server = EmbeddingStandIn("hang")
    stand_ins.append(server)
    client = make_client(embedder="http", embedding_url=server.url, embedding_dim=3, embedding_model="hang",
                         embedding_timeout_secs=1.0, query_embed_timeout_secs=0.3)
    r = client.get("/memory/query", headers=admin_headers,
                   query_string={"project": query_corpus.alpha, "query": QUESTION})
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert body["route"]["rule"] == "embedder-down" and "timeout" in body["route"]["reason"]
    assert body["search_method"] == "lexical" and body["results"]
    assert server.requests >= 1


def test_failing_vector_search_answers_from_the_lexical_engine(make_client, admin_headers, query_corpus, stand_ins):  # noqa: F811
    # The stand-in's vectors are wider than pgvector accepts, so the vector query itself fails.
    server = EmbeddingStandIn("serve", dim=16_001)
    stand_ins.append(server)
    client = make_client(embedder="http", embedding_url=server.url, embedding_dim=16_001, embedding_model="wide")
    body = client.get("/memory/query", headers=admin_headers,
                      query_string={"project": query_corpus.alpha, "query": QUESTION}).get_json()
    assert body["route"]["method"] == "hybrid"
    assert body["search_method"] == "lexical" and body["results"]
    assert any("semantic engine failed" in w for w in body["warnings"])


def test_both_engines_down_is_503_not_500(make_client, admin_headers, query_corpus):  # noqa: F811
    client = make_client(embedder="none", **_dead_opensearch())
    r = client.get("/memory/query", headers=admin_headers,
                   query_string={"project": query_corpus.alpha, "query": QUESTION})
    assert r.status_code == 503
    assert r.mimetype == "application/problem+json"
    assert r.get_json()["warnings"]
