"""Facets of a query's filtered candidate set: levels, top folders, months and tags, with counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

ROOT_FOLDER = "."  # documents at the top of a project folder
MAX_FACET_VALUES = 50


@dataclass(frozen=True)
class FacetRow:
    """What facets need to know about one candidate chunk."""

    level: int
    source: str
    updated_at: datetime | None
    tags: tuple[str, ...]


def top_folder(source: str) -> str:
    """The first folder of a vault path (``runbooks/db/x.md`` -> ``runbooks``), ``.`` for a top-level file."""
    head, sep, _rest = source.partition("/")
    return head if sep and head else ROOT_FOLDER


def month_of(moment: datetime | None) -> str | None:
    """``YYYY-MM`` in UTC, or None."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


def _ranked(counter: Counter[str], limit: int = MAX_FACET_VALUES) -> dict[str, int]:
    # Most frequent first, ties by name, so the same candidates always give the same JSON.
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:limit])


def compute_facets(rows: Iterable[FacetRow]) -> dict[str, dict[str, int]]:
    """``{levels, sources, months, tags}``: counts over ``rows`` (months newest first)."""
    levels: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    months: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    for row in rows:
        levels[str(row.level)] += 1
        sources[top_folder(row.source)] += 1
        month = month_of(row.updated_at)
        if month:
            months[month] += 1
        tags.update(set(row.tags))
    return {
        "levels": dict(sorted(levels.items())),
        "sources": _ranked(sources),
        "months": dict(sorted(months.items(), reverse=True)[:MAX_FACET_VALUES]),
        "tags": _ranked(tags),
    }
