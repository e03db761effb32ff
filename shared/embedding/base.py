"""The embedding provider interface every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


class EmbedderUnavailable(RuntimeError):
    """The embedding backend cannot answer (not configured, unreachable, timed out)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``model_id`` is stored with every vector so vectors of two models never mix.
    """

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape ``(len(texts), dim)``, each row L2-normalised."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many model tokens ``text`` has (before truncation)."""
        ...
