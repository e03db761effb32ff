"""Cache-aligned prompt builder: ``system | query | memory + chunks``, always in the same order.

Provider KV caches hit on the longest identical prefix. So the builder sorts memory and chunks by a
stable key (their id, or the hash of their text), and moves every run-specific trailer (the aligner's
``[ctx: ...]`` line and the ``<!-- CCR:... -->`` marker) out of the chunk bodies into one closing section:
two calls over the same knowledge with different timestamps share everything up to that section.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from shared.optimizer.align import CTX_LINE_PREFIX
from shared.optimizer.ccr import CCR_MARKER_RE


@dataclass(frozen=True)
class PromptPiece:
    """One piece of context for the prompt: its text and, when known, a stable id."""

    text: str
    id: str | None = None

    @property
    def sort_key(self) -> str:
        """The id, or the hash of the body (the text without its run-specific trailer)."""
        if self.id:
            return f"0:{self.id}"
        body, _ = split_trailer(self.text)
        return "1:" + hashlib.sha256(body.encode("utf-8", "replace")).hexdigest()


def split_trailer(text: str) -> tuple[str, list[str]]:
    """Split a chunk into its body and its trailing ``[ctx: ...]`` / CCR-marker lines."""
    lines = text.rstrip("\n").split("\n")
    trailer: list[str] = []
    while lines and (lines[-1].startswith(CTX_LINE_PREFIX) or CCR_MARKER_RE.fullmatch(lines[-1].strip())):
        trailer.insert(0, lines.pop())
    return "\n".join(lines), trailer


def build_prompt(
    *,
    system: str,
    query: str | None = None,
    memory: Sequence[PromptPiece | str] = (),
    chunks: Sequence[PromptPiece | str] = (),
) -> str:
    """Assemble the prompt: system, query, memory, chunks (each sorted stably), then run-specific trailers."""
    sections: list[str] = [system.strip()]
    if query:
        sections.append(f"## Query\n{query.strip()}")
    trailers: list[str] = []
    for title, pieces in (("Memory", memory), ("Context", chunks)):
        normalised = sorted((p if isinstance(p, PromptPiece) else PromptPiece(p) for p in pieces),
                            key=lambda piece: piece.sort_key)
        if not normalised:
            continue
        bodies: list[str] = []
        for number, piece in enumerate(normalised, start=1):
            label = piece.id or f"{title.lower()}-{number}"
            body, trailer = split_trailer(piece.text)
            bodies.append(f"### {label}\n{body}")
            trailers.extend(f"{label}: {line}" for line in trailer)
        sections.append(f"## {title}\n" + "\n\n".join(bodies))
    if trailers:
        sections.append("## Run-specific values\n" + "\n".join(trailers))
    return "\n\n".join(sections) + "\n"
