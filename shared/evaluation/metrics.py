"""Retrieval metrics through ranx (nDCG, MRR, recall, precision) and latency percentiles.

ranx is imported lazily: it compiles its kernels with numba on first use, which costs seconds that
``mem query`` and the API should never pay.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

# Names as ranx spells them -> names in the report.
METRICS: dict[str, str] = {
    "ndcg@10": "ndcg@10",
    "mrr@10": "mrr@10",
    "recall@10": "recall@10",
    "recall@50": "recall@50",
    "precision@5": "p@5",
}


def ir_metrics(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """nDCG@10, MRR@10, Recall@10, Recall@50 and P@5 averaged over every judged query.

    A judged query missing from ``run`` (no results) counts as zero, never as skipped.
    """
    from ranx import Qrels, Run, evaluate

    judged = {q: dict(d) for q, d in qrels.items() if d}
    # ranx needs at least one document per query; an empty result list is a run that found nothing.
    found = {q: dict(d) for q, d in run.items() if d and q in judged}
    if not found:
        return dict.fromkeys(METRICS.values(), 0.0)
    qrels_obj, run_obj = Qrels.from_dict(judged), Run.from_dict(found)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's unsafe-cast notices on uint64 ids
        scores = evaluate(qrels_obj, run_obj, list(METRICS), make_comparable=True)
    if not isinstance(scores, dict):
        scores = {next(iter(METRICS)): scores}
    return {METRICS[name]: round(float(value), 4) for name, value in scores.items()}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    if low == high:
        return float(ordered[low])
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
