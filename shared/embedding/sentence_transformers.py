"""An optional embedder backed by the ``sentence-transformers`` library (not installed by default).

Useful for models that have no ONNX export. The model must already be on disk (a path, or a name in
the local Hugging Face cache): nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from shared.embedding.base import EmbedderUnavailable


def sentence_transformers_available() -> bool:
    """Whether the ``sentence-transformers`` package can be imported."""
    return importlib.util.find_spec("sentence_transformers") is not None


class SentenceTransformerEmbedder:
    """Wraps ``sentence_transformers.SentenceTransformer`` with the :class:`Embedder` interface."""

    def __init__(self, model: str, *, batch_size: int = 32, device: str = "cpu") -> None:
        if not sentence_transformers_available():
            raise EmbedderUnavailable(
                "MEM_EMBEDDER=sentence-transformers needs the sentence-transformers package: "
                "pip install sentence-transformers (or use MEM_EMBEDDER=local)"
            )
        from sentence_transformers import SentenceTransformer  # imported here: optional dependency

        try:
            self._model: Any = SentenceTransformer(model, device=device, local_files_only=True)
        except Exception as exc:  # the library raises OSError, ValueError or hub errors for a missing model
            raise EmbedderUnavailable(
                f"cannot load sentence-transformers model {model!r} from disk: {exc}"
            ) from exc
        dim = self._model.get_sentence_embedding_dimension()
        if not dim:
            raise EmbedderUnavailable(f"model {model!r} does not report its embedding dimension")
        self.dim = int(dim)
        self.model_id = f"sentence-transformers:{model}"
        self.batch_size = batch_size

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's own tokenizer, special tokens included, untruncated."""
        return len(self._model.tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into L2-normalised float32 rows."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
