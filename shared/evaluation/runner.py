"""The runner behind ``mem eval``: every query of a dataset through :func:`shared.search.query.run_query`.

Each method runs the same code as ``/memory/query`` (so its latency is the product's latency);
chunk hits are aggregated to their document by the best chunk score, then scored with ranx.
``--sweep`` retrieves each query once with both engines and fuses the same candidates with every
semantic weight 0.0 .. 1.0, so the sweep measures the weights alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from shared.config import Settings
from shared.evaluation.datasets import Dataset
from shared.evaluation.metrics import ir_metrics, percentile
from shared.search.fusion import FusedHit
from shared.search.query import (
    QueryRequest,
    fetch_rows,
    forget_query_vectors,
    fuse_retrieval,
    near_duplicate_key,
    retrieve,
    run_query,
)

DEFAULT_METHODS: tuple[str, ...] = ("lexical", "semantic", "hybrid", "rrf", "auto")
SWEEP_WEIGHTS: tuple[float, ...] = tuple(round(i / 10, 1) for i in range(11))


@dataclass(frozen=True)
class MethodSpec:
    """A named evaluation method: the request fields it sets."""

    name: str
    method: str
    fusion: str = "linear"
    weights: tuple[float, float] | None = None


def method_specs(names: Iterable[str], semantic_weight: float | None) -> list[MethodSpec]:
    """Specs for ``names`` (lexical, semantic, hybrid, rrf, auto); ``ValueError`` for an unknown name."""
    weights = None if semantic_weight is None else (semantic_weight, round(1.0 - semantic_weight, 6))
    known = {
        "lexical": MethodSpec("lexical", "lexical"),
        "semantic": MethodSpec("semantic", "semantic"),
        "hybrid": MethodSpec("hybrid", "hybrid", "linear", weights),
        "rrf": MethodSpec("rrf", "hybrid", "rrf"),
        "auto": MethodSpec("auto", "auto", "linear", weights),
    }
    out = []
    for name in names:
        if name not in known:
            raise ValueError(f"unknown method {name!r}; choose from {', '.join(known)}")
        out.append(known[name])
    return out


def _doc_scores(hits: Sequence[tuple[str, float]], doc_ids: dict[str, str]) -> dict[str, float]:
    """Chunk (source, score) pairs -> {doc id: best chunk score}."""
    out: dict[str, float] = {}
    for source, score in hits:
        doc = doc_ids.get(source)
        if doc is not None and score > out.get(doc, float("-inf")):
            out[doc] = score
    return out


def _request(spec: MethodSpec, text: str, project: str, candidates: int, dedupe: bool = True) -> QueryRequest:
    return QueryRequest(
        query=text,
        projects=[project],
        limit=min(2 * candidates, 1000),
        method=spec.method,  # type: ignore[arg-type]
        weights=spec.weights,
        fusion=spec.fusion,  # type: ignore[arg-type]
        candidates=candidates,
        explain=False,
        dedupe=dedupe,
    )


def run_method(
    dataset: Dataset,
    project: str,
    spec: MethodSpec,
    settings: Settings,
    *,
    candidates: int = 100,
    dedupe: bool = True,
    progress: Callable[[int], None] = lambda _n: None,
) -> dict[str, Any]:
    """Metrics and latency percentiles of one method over the dataset's judged queries."""
    forget_query_vectors(settings)  # each method pays for its own query embeddings, as a cold service would
    run: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    routes: dict[str, int] = {}
    warnings = 0
    for qid, text in dataset.queries.items():
        started = time.perf_counter()
        result = run_query(_request(spec, text, project, candidates, dedupe), settings)
        latencies.append((time.perf_counter() - started) * 1000)
        routes[result.retrieval.method] = routes.get(result.retrieval.method, 0) + 1
        warnings += bool(result.warnings)
        run[qid] = _doc_scores([(c.row["source"], c.hit.score) for c in result.results], dataset.doc_paths)
        progress(1)
    scores = ir_metrics(dataset.qrels, run)
    return {
        **scores,
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "queries": len(latencies),
        "routes": routes,
        "degraded": warnings,
    }


def sweep_weights(
    dataset: Dataset,
    project: str,
    settings: Settings,
    *,
    candidates: int = 100,
    fusion: str = "linear",
    weights: Sequence[float] = SWEEP_WEIGHTS,
    progress: Callable[[int], None] = lambda _n: None,
) -> dict[str, dict[str, float]]:
    """``{"0.0": metrics, ..., "1.0": metrics}``: linear fusion at each semantic weight, same candidates."""
    runs: dict[float, dict[str, dict[str, float]]] = {w: {} for w in weights}
    for qid, text in dataset.queries.items():
        req = _request(MethodSpec("hybrid", "hybrid", fusion), text, project, candidates)
        retrieval = retrieve(req, settings)
        every: list[FusedHit] = fuse_retrieval(retrieval, req)
        rows = fetch_rows([h.chunk_id for h in every], list(retrieval.project_ids.values()))
        sources = {cid: row["source"] for cid, row in rows.items()}
        keys = {cid: near_duplicate_key(row["text"]) for cid, row in rows.items()}
        for w in weights:
            weighted = QueryRequest(**{**req.__dict__, "weights": (w, round(1.0 - w, 6))})
            hits: list[tuple[str, float]] = []
            seen: set[str] = set()
            for h in fuse_retrieval(retrieval, weighted):
                if h.chunk_id not in sources or keys[h.chunk_id] in seen:
                    continue  # deleted since indexed, or a near-duplicate (as run_query drops them)
                seen.add(keys[h.chunk_id])
                hits.append((sources[h.chunk_id], h.score))
            runs[w][qid] = _doc_scores(hits[: req.limit], dataset.doc_paths)
        progress(1)
    return {f"{w:.1f}": ir_metrics(dataset.qrels, runs[w]) for w in weights}
