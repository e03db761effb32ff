"""An embedder that calls a model server over HTTP.

Three API shapes (``MEM_EMBEDDING_API``):

* ``openai``: ``POST /v1/embeddings`` ``{"model", "input": [...]}`` -> ``{"data": [{"index", "embedding"}]}``
  (OpenAI, vLLM, LiteLLM, llama.cpp, LM Studio, ...);
* ``ollama``: ``POST /api/embed`` ``{"model", "input": [...]}`` -> ``{"embeddings": [[...]]}``;
* ``tei``: Hugging Face text-embeddings-inference ``POST /embed`` ``{"inputs": [...]}`` -> ``[[...]]``.

``MEM_EMBEDDING_URL`` may be the server's base URL or the full endpoint. Connection errors and 5xx
answers are retried with exponential backoff (urllib3 ``Retry``); whatever still fails, or answers
with the wrong shape or dimension, raises :class:`EmbedderUnavailable`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from shared.embedding.base import EmbedderUnavailable
from shared.embedding.local import TokenCounter

Api = Literal["openai", "ollama", "tei"]

_ENDPOINTS: dict[str, tuple[str, ...]] = {
    # (path appended to a base URL, suffixes that mean the URL already is the endpoint)
    "openai": ("/v1/embeddings", "/embeddings"),
    "ollama": ("/api/embed", "/api/embed"),
    "tei": ("/embed", "/embed"),
}
_RETRY_STATUSES = (500, 502, 503, 504)
_MAX_ERROR_BODY = 300


def endpoint_url(base_url: str, api: Api) -> str:
    """The full endpoint for ``api`` given a base URL or the endpoint itself."""
    if api not in _ENDPOINTS:
        raise ValueError(f"unknown embedding API {api!r}; expected one of {sorted(_ENDPOINTS)}")
    url = base_url.rstrip("/")
    path, suffix = _ENDPOINTS[api]
    if url.endswith(suffix):
        return url
    if api == "openai" and url.endswith("/v1"):
        return url + "/embeddings"
    return url + path


class HttpEmbedder:
    """Embeds through an OpenAI-compatible, Ollama or text-embeddings-inference server."""

    def __init__(
        self,
        url: str,
        *,
        api: Api = "openai",
        model: str,
        dim: int,
        api_key: str | None = None,
        timeout_secs: float = 10.0,
        batch_size: int = 32,
        retries: int = 3,
        backoff_secs: float = 0.5,
    ) -> None:
        if not url or not url.startswith(("http://", "https://")):
            raise EmbedderUnavailable(f"MEM_EMBEDDING_URL must be an http(s) URL, got {url!r}")
        if dim < 1 or batch_size < 1:
            raise ValueError("dim and batch_size must be positive")
        self.url = endpoint_url(url, api)
        self.api = api
        self.model = model
        self.dim = dim
        self.model_id = f"{api}:{model}"
        self.batch_size = batch_size
        # Connecting should be quick even when a long batch may take the full read timeout.
        self.timeout = (min(3.0, timeout_secs), timeout_secs)
        retry = Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            backoff_factor=backoff_secs,
            status_forcelist=_RETRY_STATUSES,
            allowed_methods=frozenset({"POST"}),  # embedding is idempotent, so a POST may be retried
            raise_on_status=False,
            respect_retry_after_header=True,
        )
        self._session = requests.Session()
        self._session.mount("http://", HTTPAdapter(max_retries=retry))
        self._session.mount("https://", HTTPAdapter(max_retries=retry))
        self._session.headers["Content-Type"] = "application/json"
        if api_key:
            self._session.headers["Authorization"] = f"Bearer {api_key}"
        self._counter: TokenCounter | None = None

    def count_tokens(self, text: str) -> int:
        """An estimate: the bundled WordPiece tokenizer's count (remote models rarely expose theirs)."""
        if self._counter is None:
            self._counter = TokenCounter()
        return self._counter(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size``; rows are L2-normalised float32."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{position}] is {type(text).__name__}, not str")
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        for offset in range(0, len(texts), self.batch_size):
            batch = texts[offset : offset + self.batch_size]
            result[offset : offset + len(batch)] = self._embed_batch(batch)
        return result

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def _payload(self, texts: list[str]) -> dict[str, Any]:
        if self.api == "tei":
            return {"inputs": texts, "truncate": True}
        return {"model": self.model, "input": texts}

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        try:
            response = self._session.post(self.url, json=self._payload(texts), timeout=self.timeout)
        except requests.RequestException as exc:
            raise EmbedderUnavailable(f"embedding server {self.url} unreachable: {exc}") from exc
        if response.status_code != 200:
            raise EmbedderUnavailable(
                f"embedding server {self.url} answered {response.status_code}: "
                f"{response.text[:_MAX_ERROR_BODY]!r}"
            )
        try:
            vectors = self._vectors(response.json())
            array = np.asarray(vectors, dtype=np.float32)
        except (ValueError, TypeError, KeyError) as exc:
            raise EmbedderUnavailable(
                f"embedding server {self.url} sent an unexpected answer: {exc}"
            ) from exc
        if array.ndim != 2 or array.shape[0] != len(texts):
            raise EmbedderUnavailable(
                f"embedding server {self.url} returned {array.shape[0] if array.ndim else 0} vectors "
                f"for {len(texts)} texts"
            )
        if array.shape[1] != self.dim:
            raise EmbedderUnavailable(
                f"embedding server {self.url} returned {array.shape[1]}-d vectors for model "
                f"{self.model!r}, but MEM_EMBEDDING_DIM is {self.dim}"
            )
        if not np.isfinite(array).all():
            raise EmbedderUnavailable(f"embedding server {self.url} returned non-finite values")
        norms = np.linalg.norm(array, axis=1, keepdims=True)
        return array / np.clip(norms, 1e-12, None)

    def _vectors(self, body: Any) -> list[list[float]]:
        if self.api == "openai":
            data = body["data"]
            if not isinstance(data, list):
                raise TypeError("'data' is not a list")
            # The spec gives each item an index; servers may answer out of order.
            ordered = sorted(
                data, key=lambda item: item.get("index", math.inf) if isinstance(item, dict) else 0
            )
            return [item["embedding"] for item in ordered]
        if self.api == "ollama":
            return body["embeddings"]
        if isinstance(body, dict):  # some TEI versions wrap the list
            return body["embeddings"]
        return body
