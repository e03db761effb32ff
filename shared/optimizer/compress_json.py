"""JSON compressor: crush long arrays by statistics over their fields, truncate long strings.

For an array of objects it keeps what a reader needs to understand the data and find the trouble in it:
the first and last items, items whose error/status fields say something went wrong, items with a null or
boolean that differs from the rest, numeric outliers (robust z-score over median and MAD), one
representative of every rare value of a low-cardinality field, items missing a common key, and items
matching the query. The rest become a count, and every key of the schema stays visible.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from shared.optimizer.outcome import CannotCompress

MIN_CRUSH_ITEMS = 8  # shorter arrays are kept whole: the marker would cost about what it saves
MAX_DEPTH = 64  # below this, values are kept as they are (no recursion blow-up on hostile nesting)
MAX_STRING_CHARS = 240
TRUNCATED_STRING_CHARS = 160
SCALAR_HEAD, SCALAR_TAIL = 5, 2
MAX_OUTLIERS_PER_FIELD = 5
MAX_QUERY_MATCHES = 50
RARE_SHARE = 0.05  # a categorical value held by at most this share of items is worth a representative
MAX_CATEGORIES = 20  # fields with more distinct values are identifiers, not categories
ROBUST_Z = 3.5  # Iglewicz and Hoaglin's cut-off for the modified z-score

_ERROR_KEYS = re.compile(r"^(?:err|error|errors|exception|exc|failure|fault|stack|stacktrace|traceback)$", re.I)
_LEVEL_KEYS = re.compile(r"^(?:level|severity|status|state|result|outcome|conclusion|loglevel|log_level)$", re.I)
_STATUS_CODE_KEYS = re.compile(r"^(?:status|status_code|statuscode|code|http_status|exit_code|returncode|rc)$", re.I)
_ERROR_WORDS = re.compile(
    r"\b(?:error|errors|exception|fail|failed|failure|fatal|panic|critical|crit|severe|alert|emerg|"
    r"traceback|timeout|timed out|refused|denied|abort|aborted|killed|oom)\b",
    re.I,
)
# Level and status values that mean trouble, including the one-letter levels of Android and klog.
_ERROR_LEVELS = frozenset(
    {"e", "f", "err", "error", "errors", "fatal", "severe", "critical", "crit", "alert", "emerg", "emergency",
     "panic", "fail", "failed", "failure", "exception", "timeout", "timed_out", "cancelled", "canceled"}
)
_QUERY_TERM = re.compile(r"[\w.\-/:]{3,}")


def compress_json(text: str, *, query: str | None = None, parsed: Any = None, is_parsed: bool = False) -> str:
    """Return a smaller JSON text for ``text``; raise :class:`CannotCompress` when it is not valid JSON.

    ``parsed`` (with ``is_parsed=True``) reuses a value the detector already parsed.
    """
    if not is_parsed:
        try:
            parsed = json.loads(text)
        except RecursionError as exc:
            raise CannotCompress("json_too_deep", "nesting deeper than the parser allows") from exc
        except ValueError as exc:
            raise CannotCompress("invalid_json", str(exc)) from exc
    terms = _query_terms(query)
    try:
        crushed = _crush(parsed, 0, terms)
        return json.dumps(crushed, ensure_ascii=False, separators=(",", ":"))
    except RecursionError as exc:
        raise CannotCompress("json_too_deep", "nesting deeper than the encoder allows") from exc


def _query_terms(query: str | None) -> tuple[str, ...]:
    if not query:
        return ()
    return tuple(sorted({term.lower() for term in _QUERY_TERM.findall(query)}))


def _crush(value: Any, depth: int, terms: tuple[str, ...]) -> Any:
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, str):
        return _truncate(value)
    if isinstance(value, dict):
        return {key: _crush(item, depth + 1, terms) for key, item in value.items()}
    if isinstance(value, list):
        if len(value) < MIN_CRUSH_ITEMS:
            return [_crush(item, depth + 1, terms) for item in value]
        objects = sum(1 for item in value if isinstance(item, dict))
        if objects >= 0.8 * len(value):
            return _crush_objects(value, depth, terms)
        return _crush_scalars(value, depth, terms)
    return value


def _truncate(value: str) -> str:
    if len(value) <= MAX_STRING_CHARS:
        return value
    return f"{value[:TRUNCATED_STRING_CHARS]}…[+{len(value) - TRUNCATED_STRING_CHARS} chars]"


def _matches_query(item: Any, terms: tuple[str, ...]) -> bool:
    if not terms:
        return False
    try:
        flat = json.dumps(item, ensure_ascii=False).lower()
    except (TypeError, ValueError, RecursionError):
        return False
    return any(term in flat for term in terms)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _looks_like_error(key: str, value: Any) -> bool:
    if value is None or value == "" or value is False or value == [] or value == {}:
        return False
    if _ERROR_KEYS.match(key):
        return True
    if _LEVEL_KEYS.match(key) and isinstance(value, str) and value.strip().lower() in _ERROR_LEVELS:
        return True
    if isinstance(value, str):
        return bool(_ERROR_WORDS.search(value[:2000]))
    if _STATUS_CODE_KEYS.match(key) and _is_number(value):
        # HTTP-style status codes and non-zero exit codes.
        return (value >= 400 and value < 600) or (key.lower() in {"exit_code", "returncode", "rc"} and value != 0)
    return False


def _numeric_outliers(indexed: list[tuple[int, float]]) -> Iterable[int]:
    values = sorted(v for _, v in indexed)
    median = values[len(values) // 2]
    mad = sorted(abs(v - median) for v in values)[len(values) // 2]
    if mad == 0:
        # Nearly constant field: any value off the common one is the story.
        off = [(abs(v - median), i) for i, v in indexed if v != median]
        if len(off) > 0.05 * len(indexed):
            return []
        scored = off
    else:
        scored = [(abs(0.6745 * (v - median) / mad), i) for i, v in indexed]
        scored = [(z, i) for z, i in scored if z > ROBUST_Z]
    scored.sort(reverse=True)
    return [i for _, i in scored[:MAX_OUTLIERS_PER_FIELD]]


def _minority_indexes(indexed: list[tuple[int, Any]], total: int) -> Iterable[int]:
    """Items whose value of a low-cardinality field is rare: one representative per rare value."""
    counts = Counter(_hashable(v) for _, v in indexed)
    # More distinct values than this and the field is an identifier or a measurement, not a category.
    if len(counts) < 2 or len(counts) > min(MAX_CATEGORIES, max(2, total // 4)):
        return []
    seen: set[Any] = set()
    picked: list[int] = []
    for index, value in indexed:
        key = _hashable(value)
        if key in seen:
            continue
        seen.add(key)
        if counts[key] <= max(1, RARE_SHARE * total) or len(counts) <= MAX_CATEGORIES // 2:
            picked.append(index)
    return picked


def _hashable(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return (type(value).__name__, value)


def _crush_objects(items: list[Any], depth: int, terms: tuple[str, ...]) -> list[Any]:
    total = len(items)
    keys: dict[str, None] = {}
    for item in items:
        if isinstance(item, dict):
            keys.update(dict.fromkeys(item))
    keep: set[int] = {0, total - 1}
    query_hits = 0
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            keep.add(index)  # the odd non-object is itself an outlier
            continue
        if any(_looks_like_error(str(k), v) for k, v in item.items()):
            keep.add(index)
        if query_hits < MAX_QUERY_MATCHES and _matches_query(item, terms):
            keep.add(index)
            query_hits += 1
    for key in keys:
        present = [(i, item[key]) for i, item in enumerate(items) if isinstance(item, dict) and key in item]
        if len(present) < total:
            missing = [i for i, item in enumerate(items) if isinstance(item, dict) and key not in item]
            rare = missing if len(missing) <= len(present) else [i for i, _ in present]
            keep.update(rare[:MAX_OUTLIERS_PER_FIELD])
        if not present:
            continue
        nulls = [i for i, v in present if v is None]
        if nulls and len(nulls) <= len(present) / 2:
            keep.update(nulls[:MAX_OUTLIERS_PER_FIELD])
        elif nulls:
            keep.update([i for i, v in present if v is not None][:MAX_OUTLIERS_PER_FIELD])
        bools = [(i, v) for i, v in present if isinstance(v, bool)]
        if bools:
            trues = [i for i, v in bools if v]
            falses = [i for i, v in bools if not v]
            minority = trues if len(trues) <= len(falses) else falses
            keep.update(minority[:MAX_OUTLIERS_PER_FIELD])
        numbers = [(i, float(v)) for i, v in present if _is_number(v)]
        if len(numbers) >= MIN_CRUSH_ITEMS:
            keep.update(_numeric_outliers(numbers))
        scalars = [(i, v) for i, v in present if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))]
        if scalars:
            keep.update(_minority_indexes(scalars, total))

    kept_items = [_crush(items[i], depth + 1, terms) for i in sorted(keep)]
    omitted = total - len(keep)
    if omitted <= 0:
        return kept_items
    shown: set[str] = set()
    for i in keep:
        if isinstance(items[i], dict):
            shown.update(items[i])
    marker: dict[str, Any] = {"_omitted": omitted, "_total": total}
    not_shown = [k for k in keys if k not in shown]
    if not_shown:
        marker["_keys_not_shown"] = not_shown
    return [*kept_items, marker]


def _crush_scalars(items: list[Any], depth: int, terms: tuple[str, ...]) -> list[Any]:
    total = len(items)
    keep: set[int] = set(range(min(SCALAR_HEAD, total))) | set(range(max(0, total - SCALAR_TAIL), total))
    numbers = [(i, float(v)) for i, v in enumerate(items) if _is_number(v)]
    if len(numbers) >= MIN_CRUSH_ITEMS:
        keep.update(_numeric_outliers(numbers))
    for index, item in enumerate(items):
        if isinstance(item, dict | list) or _looks_like_error("", item) or _matches_query(item, terms):
            keep.add(index)
    kept = [_crush(items[i], depth + 1, terms) for i in sorted(keep)]
    omitted = total - len(keep)
    if omitted <= 0:
        return kept
    return [*kept, f"…[{omitted} of {total} items omitted]"]
