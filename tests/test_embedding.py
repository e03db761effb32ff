"""Embedding providers and caches, against the real model, a real HTTP server and the real Redis."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import redis

from shared.config import Settings
from shared.embedding import get_embedder, get_token_counter
from shared.embedding.base import Embedder, EmbedderUnavailable
from shared.embedding.cache import CachedEmbedder, QueryEmbeddingCache, normalise_query
from shared.embedding.http import HttpEmbedder, endpoint_url
from shared.embedding.local import LocalOnnxEmbedder, ModelIntegrityError, file_sha256
from shared.embedding.sentence_transformers import (
    SentenceTransformerEmbedder,
    sentence_transformers_available,
)

REDIS_URL = "redis://127.0.0.1:6379/0"


# --- the local ONNX model -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalOnnxEmbedder:
    return LocalOnnxEmbedder(batch_size=4)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_local_embedder_ranks_meaning(local: LocalOnnxEmbedder) -> None:
    query, near, far = local.embed(
        ["kubectl rollout undo deployment", "roll back a Kubernetes deployment", "bake sourdough bread"]
    )
    assert cosine(query, near) > cosine(query, far) + 0.2


def test_local_embedder_shape_norm_order_and_determinism(local: LocalOnnxEmbedder) -> None:
    assert isinstance(local, Embedder)
    assert local.dim == 384 and local.model_id
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(11)] + ["", "ünïcödé 日本語"]
    vectors = local.embed(texts)
    assert vectors.shape == (13, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([local.embed([t])[0] for t in texts])
    # Sorting by length and batching (batch_size=4) must not change any vector or its row.
    assert np.allclose(vectors, one_by_one, atol=1e-5)
    assert np.array_equal(local.embed(texts), vectors)
    assert local.embed([]).shape == (0, 384)


def test_local_embedder_truncates_at_256_tokens(local: LocalOnnxEmbedder) -> None:
    base = "the deploy failed because the image tag was missing " * 40  # > 256 tokens
    assert local.count_tokens(base) > 300
    longer = base + "and then something entirely unrelated about gardening tomatoes " * 20
    a, b = local.embed([base, longer])
    assert np.allclose(a, b, atol=1e-5)  # the tail beyond 256 tokens is not seen
    short = "the deploy failed because the image tag was missing " * 10
    c = local.embed([short + "gardening tomatoes " * 20])[0]
    assert not np.allclose(local.embed([short])[0], c, atol=1e-3)  # under 256 tokens, the text counts


def test_count_tokens_is_untruncated_with_special_tokens(local: LocalOnnxEmbedder) -> None:
    assert local.count_tokens("") == 2  # [CLS] [SEP]
    assert local.count_tokens("hello world") == 4
    assert local.count_tokens("word " * 1000) == 1002


def test_local_embedder_rejects_bad_input(local: LocalOnnxEmbedder) -> None:
    with pytest.raises(TypeError, match="single string"):
        local.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        local.embed(["ok", None])  # type: ignore[list-item]


def test_model_checksum_mismatch_is_refused(tmp_path: Path) -> None:
    wrong = LocalOnnxEmbedder(expected_sha256="0" * 64)
    with pytest.raises(ModelIntegrityError, match="does not match"):
        wrong.embed(["x"])
    corrupt = tmp_path / "model.onnx"
    corrupt.write_bytes(b"not a model")
    with pytest.raises(ModelIntegrityError):
        LocalOnnxEmbedder(model_path=corrupt).embed(["x"])
    assert file_sha256(corrupt, block_size=3) == file_sha256(corrupt)
    with pytest.raises(EmbedderUnavailable, match="missing"):
        LocalOnnxEmbedder(model_path=tmp_path / "absent.onnx").embed(["x"])


# --- HTTP backends --------------------------------------------------------------------------------


class _ModelServer(ThreadingHTTPServer):
    """Speaks the OpenAI, Ollama and TEI embedding APIs; fails the first ``fail_next`` calls with 503."""

    daemon_threads = True

    def __init__(self, dim: int = 8) -> None:
        super().__init__(("127.0.0.1", 0), _ModelHandler)
        self.dim = dim
        self.fail_next = 0
        self.requests: list[tuple[str, dict | list]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def vector(self, text: str) -> list[float]:
        # Deterministic, text-dependent and not normalised, so the client's normalisation shows.
        seed = sum(text.encode()) + len(text)
        return [float((seed * (i + 3)) % 17 + 1) for i in range(self.dim)]


class _ModelHandler(BaseHTTPRequestHandler):
    server: _ModelServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append((self.path, body))
            failing = self.server.fail_next > 0
            self.server.fail_next -= 1 if failing else 0
        if failing:
            self._send(503, {"error": "loading model"})
            return
        if self.path == "/v1/embeddings":
            items = [{"index": i, "embedding": self.server.vector(t)} for i, t in enumerate(body["input"])]
            self._send(200, {"object": "list", "data": list(reversed(items)), "model": body["model"]})
        elif self.path == "/api/embed":
            self._send(
                200, {"model": body["model"], "embeddings": [self.server.vector(t) for t in body["input"]]}
            )
        elif self.path == "/embed":
            self._send(200, [self.server.vector(t) for t in body["inputs"]])
        else:
            self._send(404, {"error": "not found"})


@pytest.fixture
def model_server() -> Iterator[_ModelServer]:
    server = _ModelServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.mark.parametrize(
    ("api", "path"), [("openai", "/v1/embeddings"), ("ollama", "/api/embed"), ("tei", "/embed")]
)
def test_http_embedder_speaks_each_api(model_server: _ModelServer, api: str, path: str) -> None:
    embedder = HttpEmbedder(model_server.url, api=api, model="m", dim=8, batch_size=2, backoff_secs=0.01)  # type: ignore[arg-type]
    texts = ["alpha", "beta", "gamma"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    expected = np.array([model_server.vector(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected)  # right rows in the right order (OpenAI answers reversed)
    assert [p for p, _ in model_server.requests] == [path, path]  # two batches
    assert embedder.model_id == f"{api}:m"


def test_http_embedder_retries_503_then_succeeds(model_server: _ModelServer) -> None:
    model_server.fail_next = 2
    embedder = HttpEmbedder(model_server.url, api="ollama", model="m", dim=8, retries=3, backoff_secs=0.01)
    assert embedder.embed(["x"]).shape == (1, 8)
    assert len(model_server.requests) == 3


def test_http_embedder_gives_up_with_embedder_unavailable(model_server: _ModelServer) -> None:
    model_server.fail_next = 100
    embedder = HttpEmbedder(model_server.url, api="tei", model="m", dim=8, retries=2, backoff_secs=0.01)
    with pytest.raises(EmbedderUnavailable, match="503"):
        embedder.embed(["x"])
    assert len(model_server.requests) == 3


def test_http_embedder_checks_dimension(model_server: _ModelServer) -> None:
    embedder = HttpEmbedder(model_server.url, api="openai", model="m", dim=768, backoff_secs=0.01)
    with pytest.raises(EmbedderUnavailable, match="8-d vectors"):
        embedder.embed(["x"])


def test_http_embedder_unreachable_and_bad_config() -> None:
    closed = ThreadingHTTPServer(("127.0.0.1", 0), _ModelHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens on this port any more
    embedder = HttpEmbedder(f"http://127.0.0.1:{port}", model="m", dim=8, retries=1, backoff_secs=0.01)
    with pytest.raises(EmbedderUnavailable, match="unreachable"):
        embedder.embed(["x"])
    with pytest.raises(EmbedderUnavailable, match="http"):
        HttpEmbedder("localhost:1234", model="m", dim=8)


def test_endpoint_url_accepts_base_or_full_endpoint() -> None:
    assert endpoint_url("http://h:1", "openai") == "http://h:1/v1/embeddings"
    assert endpoint_url("http://h:1/v1/", "openai") == "http://h:1/v1/embeddings"
    assert endpoint_url("http://h:1/v1/embeddings", "openai") == "http://h:1/v1/embeddings"
    assert endpoint_url("http://h:1", "ollama") == "http://h:1/api/embed"
    assert endpoint_url("http://h:1/embed", "tei") == "http://h:1/embed"


# --- caches ---------------------------------------------------------------------------------------


def test_cached_embedder_asks_the_backend_once_per_text(model_server: _ModelServer) -> None:
    inner = HttpEmbedder(model_server.url, api="tei", model="m", dim=8, batch_size=100, backoff_secs=0.01)
    cached = CachedEmbedder(inner, max_entries=3)
    first = cached.embed(["a", "b", "a"])
    assert [len(body["inputs"]) for _, body in model_server.requests] == [2]  # "a" embedded once
    again = cached.embed(["b", "a"])
    assert len(model_server.requests) == 1  # all hits
    assert np.array_equal(again, first[[1, 0]])
    cached.embed(["c", "d"])  # capacity 3: "b" (least recently used) is evicted
    cached.embed(["b"])
    assert [body["inputs"] for _, body in model_server.requests] == [["a", "b"], ["c", "d"], ["b"]]
    again[0, 0] = 99.0  # the caller's array is a copy: the cache is not corrupted
    assert cached.embed(["b"])[0, 0] != 99.0
    assert cached.count_tokens("hello world") == inner.count_tokens("hello world")


def test_query_cache_in_process_with_ttl(local: LocalOnnxEmbedder) -> None:
    now = [1000.0]
    cache = QueryEmbeddingCache(ttl_secs=60, timer=lambda: now[0])
    vector = cache.embed_query(local, "  roll back   deploy ")
    assert cache.get(local.model_id, "roll back deploy") is not None  # normalised key
    assert cache.get("other-model", "roll back deploy") is None
    assert np.array_equal(cache.embed_query(local, "roll back deploy"), vector)
    now[0] += 61
    assert cache.get(local.model_id, "roll back deploy") is None


def test_query_cache_in_redis_is_shared_and_expires() -> None:
    prefix = f"test:qemb:{uuid.uuid4().hex}:"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        writer = QueryEmbeddingCache(ttl_secs=0.3, redis_url=REDIS_URL, key_prefix=prefix)
        reader = QueryEmbeddingCache(ttl_secs=0.3, redis_url=REDIS_URL, key_prefix=prefix)
        vector = np.arange(4, dtype=np.float32) / 10
        writer.put("model", "Why did CI fail?", vector)
        assert np.array_equal(reader.get("model", "Why  did CI fail?"), vector)  # another process sees it
        keys = client.keys(prefix + "*")
        assert len(keys) == 1 and 0 < client.pttl(keys[0]) <= 300
        # Redis expires the key; wait on the condition with a deadline.
        deadline = time.monotonic() + 5
        while reader.get("model", "Why did CI fail?") is not None:
            assert time.monotonic() < deadline, "key did not expire"
            threading.Event().wait(0.05)
    finally:
        for key in client.scan_iter(prefix + "*"):
            client.delete(key)
        client.close()


def test_query_cache_survives_redis_outage() -> None:
    cache = QueryEmbeddingCache(redis_url="redis://127.0.0.1:1/0", key_prefix="unused:")
    vector = np.ones(3, dtype=np.float32)
    cache.put("model", "q", vector)  # no exception: falls back to the in-process cache
    assert np.array_equal(cache.get("model", "q"), vector)


def test_normalise_query() -> None:
    assert normalise_query("  Ｆｕｌｌwidth\tquery \n") == "Fullwidth query"


# --- selection ------------------------------------------------------------------------------------


def test_get_embedder_selects_and_reuses(model_server: _ModelServer) -> None:
    assert get_embedder(Settings(embedder="none")) is None
    local_settings = Settings(embedder="local")
    first = get_embedder(local_settings)
    assert first is get_embedder(Settings(embedder="local"))  # one instance per process and config
    assert first is not None and first.dim == 384
    http = get_embedder(
        Settings(embedder="http", embedding_url=model_server.url, embedding_api="ollama", embedding_dim=8)
    )
    assert (
        http is not None and http.model_id == "ollama:nomic-embed-text" and http.embed(["x"]).shape == (1, 8)
    )
    with pytest.raises(EmbedderUnavailable, match="MEM_EMBEDDING_URL"):
        get_embedder(Settings(embedder="http", embedding_url=None))
    assert get_token_counter(Settings(embedder="none"))("hello world") == 4


@pytest.mark.skipif(sentence_transformers_available(), reason="sentence-transformers is installed")
def test_sentence_transformers_absent_is_a_clear_error() -> None:
    with pytest.raises(EmbedderUnavailable, match="pip install sentence-transformers"):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.mark.skipif(not sentence_transformers_available(), reason="sentence-transformers is not installed")
def test_sentence_transformers_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="cannot load"):
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))
