"""The context optimizer: detect, compress by type, align, keep originals under CCR hashes.

Public entry points: :func:`optimize_chunks` (the pipeline), :func:`get_ccr_store` (where originals live),
:func:`build_prompt` (cache-aligned prompt) and :func:`count_tokens`. Modules import lazily what is heavy
(magika loads on the first detection that needs it).
"""

from __future__ import annotations

from shared.optimizer.ccr import CCREntry, CCRStore, CCRUnavailable, get_ccr_store
from shared.optimizer.pipeline import (
    InputChunk,
    InputTooLarge,
    OptimizedChunk,
    OptimizeResult,
    optimize_chunks,
)
from shared.optimizer.prompt import PromptPiece, build_prompt
from shared.optimizer.tokens import count_tokens

__all__ = [
    "CCREntry",
    "CCRStore",
    "CCRUnavailable",
    "InputChunk",
    "InputTooLarge",
    "OptimizeResult",
    "OptimizedChunk",
    "PromptPiece",
    "build_prompt",
    "count_tokens",
    "get_ccr_store",
    "optimize_chunks",
]
