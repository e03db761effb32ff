"""Fusion math: min-max guards, cosine distance mapping, missing components, linear and RRF, explanations."""

from __future__ import annotations

import math

import pytest

from shared.search.fusion import (
    RRF_K,
    EngineHit,
    explain,
    fuse_linear,
    fuse_rrf,
    lexical_hits,
    min_max,
    semantic_hits,
    similarity_from_cosine_distance,
)


def test_min_max_maps_best_to_one_and_worst_to_zero() -> None:
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]


def test_min_max_single_value_is_one() -> None:
    assert min_max([7.5]) == [1.0]


def test_min_max_all_equal_are_one_not_nan() -> None:
    assert min_max([0.3, 0.3, 0.3]) == [1.0, 1.0, 1.0]


def test_min_max_empty_and_non_finite() -> None:
    assert min_max([]) == []
    out = min_max([1.0, float("nan"), 3.0])
    assert out == [0.0, 0.0, 1.0]
    assert min_max([float("nan")]) == [0.0]


def test_cosine_distance_maps_to_similarity_nearest_best() -> None:
    assert similarity_from_cosine_distance(0.0) == 1.0
    assert similarity_from_cosine_distance(1.0) == 0.0
    assert similarity_from_cosine_distance(2.0) == -1.0
    hits = semantic_hits([("far", 0.9), ("near", 0.1), ("mid", 0.5)])
    assert [h.chunk_id for h in hits] == ["near", "mid", "far"]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].raw == pytest.approx(0.9)
    fused = fuse_linear(hits, [], 1.0, 0.0)
    assert fused[0].chunk_id == "near" and fused[0].semantic == 1.0
    assert fused[-1].chunk_id == "far" and fused[-1].semantic == 0.0


def test_linear_fusion_weights_and_missing_component_is_zero() -> None:
    sem = semantic_hits([("a", 0.2), ("b", 0.4), ("c", 0.6)])  # sims 0.8, 0.6, 0.4 -> 1, .5, 0
    lex = lexical_hits([("b", 10.0), ("d", 5.0)])  # -> b 1, d 0
    fused = {h.chunk_id: h for h in fuse_linear(sem, lex, 0.6, 0.4)}
    assert fused["a"].score == pytest.approx(0.6 * 1.0)
    assert fused["a"].lexical == 0.0 and fused["a"].lexical_rank is None and fused["a"].lexical_raw is None
    assert fused["b"].score == pytest.approx(0.6 * 0.5 + 0.4 * 1.0)
    assert fused["c"].score == pytest.approx(0.0)
    assert fused["d"].score == pytest.approx(0.0)
    assert fused["d"].semantic_rank is None
    order = [h.chunk_id for h in fuse_linear(sem, lex, 0.6, 0.4)]
    assert order[:2] == ["b", "a"]


def test_linear_fusion_deduplicates_chunks() -> None:
    sem = [EngineHit("a", 0.9, 1), EngineHit("a", 0.5, 2), EngineHit("b", 0.1, 3)]
    fused = fuse_linear(sem, [EngineHit("a", 3.0, 1)], 0.5, 0.5)
    assert sorted(h.chunk_id for h in fused) == ["a", "b"]


def test_ties_are_ordered_deterministically() -> None:
    lex = lexical_hits([("z", 1.0), ("y", 1.0), ("x", 1.0)])
    first = [h.chunk_id for h in fuse_linear([], lex, 0.0, 1.0)]
    assert first == [h.chunk_id for h in fuse_linear([], list(reversed(lex)), 0.0, 1.0)]


def test_rrf_uses_ranks_with_k_60() -> None:
    sem = semantic_hits([("a", 0.1), ("b", 0.2)])
    lex = lexical_hits([("b", 9.0), ("c", 1.0)])
    fused = {h.chunk_id: h for h in fuse_rrf(sem, lex, 1.0, 1.0)}
    assert RRF_K == 60
    assert fused["a"].score == pytest.approx(1 / 61)
    assert fused["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"].score == pytest.approx(1 / 62)
    assert fuse_rrf(sem, lex)[0].chunk_id == "b"


def test_weighted_rrf_scales_each_engine() -> None:
    sem = semantic_hits([("a", 0.1)])
    lex = lexical_hits([("b", 9.0)])
    fused = fuse_rrf(sem, lex, 0.25, 0.75)
    assert [h.chunk_id for h in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(0.75 / 61)


def test_explanations_say_how_strong_each_match_was() -> None:
    sem = semantic_hits([("a", 0.1), ("b", 0.5), ("c", 0.9)])
    lex = lexical_hits([("c", 20.0), ("b", 2.0)])
    fused = {h.chunk_id: h for h in fuse_linear(sem, lex, 0.6, 0.4)}
    assert explain(fused["c"]) == "strong exact-term match, weak meaning match; found by both engines"
    assert explain(fused["a"]) == "strong meaning match, no exact-term match"
    lexical_only = fuse_linear([], lex, 0.0, 1.0)[0]
    assert explain(lexical_only) == "strong exact-term match (lexical only)"
    breakdown = fused["b"].breakdown()
    assert set(breakdown) >= {
        "semantic", "lexical", "semantic_raw", "lexical_raw", "semantic_rank", "lexical_rank",
        "semantic_weight", "lexical_weight", "reason",
    }
    assert breakdown["semantic_weight"] == 0.6 and breakdown["lexical_weight"] == 0.4
    assert all(math.isfinite(v) for v in (breakdown["semantic"], breakdown["lexical"]))  # type: ignore[arg-type]
