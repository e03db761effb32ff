"""Score normalisation, fusion (linear and RRF) and the per-result explanation.

Normalisation (:func:`min_max`): each engine's candidate scores are mapped to [0, 1] on their own,
best = 1, worst = 0. Guards: a single candidate, or candidates that all score the same, get 1.0
(each is the engine's best answer; there is nothing to spread). Semantic scores arrive as pgvector
cosine *distances* (0 = same direction, 2 = opposite); they are turned into similarities
``1 - distance`` first, so the nearest chunk is the best, never the worst.

Missing component: a chunk that one engine did not return (it was outside that engine's top
``candidates``, or the engine was not asked or failed) gets 0 for that engine's component. This is
deliberate: in linear fusion it ranks a chunk found by both engines above one found by a single
engine with the same normalised score, and it needs no second round-trip to score the stragglers.

Linear fusion: ``score = w_sem * sem + w_lex * lex``. RRF: ``score = sum 1 / (k + rank)`` over the
engines that returned the chunk (k = 60, Cormack et al. 2009), each term multiplied by its weight
(1.0 each unless the caller passes others).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

RRF_K = 60
EQUAL_EPSILON = 1e-9
Fusion = Literal["linear", "rrf"]


@dataclass(frozen=True)
class EngineHit:
    """One engine's candidate: chunk id, raw score (higher is better) and 1-based rank."""

    chunk_id: str
    raw: float
    rank: int


@dataclass
class FusedHit:
    """A fused result and everything needed to explain its score."""

    chunk_id: str
    score: float = 0.0
    semantic: float = 0.0
    lexical: float = 0.0
    semantic_raw: float | None = None
    lexical_raw: float | None = None
    semantic_rank: int | None = None
    lexical_rank: int | None = None
    semantic_weight: float = 0.0
    lexical_weight: float = 0.0
    fusion: Fusion = "linear"
    extra: dict[str, float] = field(default_factory=dict)

    def breakdown(self) -> dict[str, object]:
        """The ``breakdown`` object of a result (see :func:`explain`)."""
        return {
            "semantic": round(self.semantic, 6),
            "lexical": round(self.lexical, 6),
            "semantic_raw": None if self.semantic_raw is None else round(self.semantic_raw, 6),
            "lexical_raw": None if self.lexical_raw is None else round(self.lexical_raw, 6),
            "semantic_rank": self.semantic_rank,
            "lexical_rank": self.lexical_rank,
            "semantic_weight": self.semantic_weight,
            "lexical_weight": self.lexical_weight,
            "fusion": self.fusion,
            "reason": explain(self),
        }


def similarity_from_cosine_distance(distance: float) -> float:
    """pgvector's ``<=>`` (cosine distance, 0..2) as a similarity in [-1, 1] where higher is closer."""
    return 1.0 - float(distance)


def semantic_hits(distances: Sequence[tuple[str, float]]) -> list[EngineHit]:
    """Engine hits from ``(chunk id, cosine distance)`` pairs, nearest first."""
    ordered = sorted(distances, key=lambda pair: (pair[1], pair[0]))
    return [
        EngineHit(chunk_id, similarity_from_cosine_distance(distance), rank)
        for rank, (chunk_id, distance) in enumerate(ordered, start=1)
    ]


def lexical_hits(scores: Sequence[tuple[str, float]]) -> list[EngineHit]:
    """Engine hits from ``(chunk id, BM25 score)`` pairs, best first."""
    ordered = sorted(scores, key=lambda pair: (-pair[1], pair[0]))
    return [EngineHit(chunk_id, float(score), rank) for rank, (chunk_id, score) in enumerate(ordered, start=1)]


def min_max(values: Sequence[float]) -> list[float]:
    """Scale ``values`` to [0, 1] (max -> 1, min -> 0); one value or all equal -> all 1.0.

    Non-finite values (a NaN score from a broken engine) count as the minimum rather than poisoning
    the scale.
    """
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return [0.0 for _ in values]
    low, high = min(finite), max(finite)
    span = high - low
    if span <= EQUAL_EPSILON * max(1.0, abs(high)):
        return [1.0 if math.isfinite(v) else 0.0 for v in values]
    return [(v - low) / span if math.isfinite(v) else 0.0 for v in values]


def _dedupe(hits: Sequence[EngineHit]) -> list[EngineHit]:
    """An engine's hits with each chunk once (its best rank); engines should not repeat, but be safe."""
    seen: dict[str, EngineHit] = {}
    for hit in hits:
        if hit.chunk_id not in seen or hit.rank < seen[hit.chunk_id].rank:
            seen[hit.chunk_id] = hit
    return sorted(seen.values(), key=lambda h: h.rank)


def _merge(semantic: Sequence[EngineHit], lexical: Sequence[EngineHit]) -> dict[str, FusedHit]:
    fused: dict[str, FusedHit] = {}
    sem = _dedupe(semantic)
    for hit, norm in zip(sem, min_max([h.raw for h in sem]), strict=True):
        fused[hit.chunk_id] = FusedHit(hit.chunk_id, semantic=norm, semantic_raw=hit.raw, semantic_rank=hit.rank)
    lex = _dedupe(lexical)
    for hit, norm in zip(lex, min_max([h.raw for h in lex]), strict=True):
        entry = fused.setdefault(hit.chunk_id, FusedHit(hit.chunk_id))
        entry.lexical, entry.lexical_raw, entry.lexical_rank = norm, hit.raw, hit.rank
    return fused


def _sorted(hits: list[FusedHit]) -> list[FusedHit]:
    def best_rank(h: FusedHit) -> int:
        return min(r for r in (h.semantic_rank, h.lexical_rank, 1 << 30) if r is not None)

    return sorted(hits, key=lambda h: (-h.score, best_rank(h), h.chunk_id))


def fuse_linear(
    semantic: Sequence[EngineHit], lexical: Sequence[EngineHit], w_sem: float, w_lex: float
) -> list[FusedHit]:
    """``w_sem * minmax(sem) + w_lex * minmax(lex)`` per chunk, a missing component being 0; best first."""
    fused = _merge(semantic, lexical)
    for hit in fused.values():
        hit.semantic_weight, hit.lexical_weight, hit.fusion = w_sem, w_lex, "linear"
        hit.score = w_sem * hit.semantic + w_lex * hit.lexical
    return _sorted(list(fused.values()))


def fuse_rrf(
    semantic: Sequence[EngineHit],
    lexical: Sequence[EngineHit],
    w_sem: float = 1.0,
    w_lex: float = 1.0,
    k: int = RRF_K,
) -> list[FusedHit]:
    """Reciprocal rank fusion: ``w / (k + rank)`` summed over the engines that returned the chunk.

    The min-max components are still computed so the explanation can say how strong each match was;
    the score uses ranks only.
    """
    fused = _merge(semantic, lexical)
    for hit in fused.values():
        hit.semantic_weight, hit.lexical_weight, hit.fusion = w_sem, w_lex, "rrf"
        sem = w_sem / (k + hit.semantic_rank) if hit.semantic_rank is not None else 0.0
        lex = w_lex / (k + hit.lexical_rank) if hit.lexical_rank is not None else 0.0
        hit.extra = {"semantic_rrf": sem, "lexical_rrf": lex}
        hit.score = sem + lex
    return _sorted(list(fused.values()))


def fuse(
    semantic: Sequence[EngineHit],
    lexical: Sequence[EngineHit],
    *,
    fusion: Fusion,
    w_sem: float,
    w_lex: float,
) -> list[FusedHit]:
    """Dispatch to :func:`fuse_linear` or :func:`fuse_rrf` (RRF takes the weights as multipliers)."""
    if fusion == "rrf":
        return fuse_rrf(semantic, lexical, w_sem, w_lex)
    return fuse_linear(semantic, lexical, w_sem, w_lex)


def _strength(value: float, found: bool) -> str:
    if not found:
        return "no"
    if value >= 0.7:
        return "strong"
    if value >= 0.35:
        return "moderate"
    return "weak"


def explain(hit: FusedHit) -> str:
    """A short sentence on why the chunk ranks where it does, e.g. "strong exact-term match, weak meaning match"."""
    lex_found, sem_found = hit.lexical_rank is not None, hit.semantic_rank is not None
    lex = f"{_strength(hit.lexical, lex_found)} exact-term match"
    sem = f"{_strength(hit.semantic, sem_found)} meaning match"
    if hit.semantic_weight == 0 and not sem_found:
        return lex + " (lexical only)"
    if hit.lexical_weight == 0 and not lex_found:
        return sem + " (semantic only)"
    parts = [lex, sem] if hit.lexical * hit.lexical_weight >= hit.semantic * hit.semantic_weight else [sem, lex]
    sentence = ", ".join(parts)
    if lex_found and sem_found:
        sentence += "; found by both engines"
    return sentence
