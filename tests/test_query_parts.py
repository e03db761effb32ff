"""The small pure parts of a query: facets, glob translation, near-duplicates, vault links, validation."""

from __future__ import annotations

import fnmatch
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.config import Settings
from shared.search.context import breadcrumb_full, vault_url
from shared.search.facets import FacetRow, compute_facets, top_folder
from shared.search.lexical import LexicalFilters
from shared.search.query import QueryError, QueryRequest, near_duplicate_key, parse_since, validate_request
from shared.search.vector_store import glob_to_postgres_regex, vector_literal


def test_facets_count_levels_top_folders_months_and_tags() -> None:
    rows = [
        FacetRow(1, "runbooks/db/pg.md", datetime(2024, 3, 31, 23, 30, tzinfo=timezone(timedelta(hours=-2))), ("db",)),
        FacetRow(1, "runbooks/redis.md", datetime(2024, 3, 2, tzinfo=UTC), ("cache", "db")),
        FacetRow(0, "notes.md", None, ()),
        FacetRow(2, "skills/x.md", datetime(2023, 12, 1, tzinfo=UTC), ("db", "db")),
    ]
    facets = compute_facets(rows)
    assert facets["levels"] == {"0": 1, "1": 2, "2": 1}
    assert facets["sources"] == {"runbooks": 2, ".": 1, "skills": 1}
    assert facets["months"] == {"2024-04": 1, "2024-03": 1, "2023-12": 1}  # UTC month of 23:30 at -02:00
    assert facets["tags"] == {"db": 3, "cache": 1}
    assert compute_facets([]) == {"levels": {}, "sources": {}, "months": {}, "tags": {}}
    assert top_folder("a/b/c.md") == "a" and top_folder("c.md") == "."


@pytest.mark.parametrize("pattern", ["runbooks/*", "*.md", "runbooks/p?d-*.md", "[!r]*", "[a-r]*/*", "a+b(c)|d.md",
                                     "[unclosed*", "*#1*", "runbooks/[pq]od-*"])
def test_glob_translation_matches_fnmatch(pattern: str) -> None:
    paths = ["runbooks/pod-crash.md", "runbooks/qod-x.md", "notes.md", "skills/a.md", "a+b(c)|d.md",
             "[unclosed-x", "x#1y.md", "runbooks/deep/pod-x.md", "Runbooks/pod.md"]
    regex = re.compile(glob_to_postgres_regex(pattern))
    for path in paths:
        assert bool(regex.search(path)) == fnmatch.fnmatchcase(path, pattern), (pattern, path)


def test_vector_literal_rejects_non_finite() -> None:
    assert vector_literal([0.5, -1.0]) == "[0.5,-1.0]"
    with pytest.raises(ValueError):
        vector_literal([float("nan")])
    with pytest.raises(ValueError):
        vector_literal([])


def test_near_duplicates_ignore_case_whitespace_and_markup() -> None:
    lead = "Runbook title\n\nThe pod restarts   after DEPLOY."
    section = "# Runbook title\nthe pod restarts after deploy."
    assert near_duplicate_key(lead) == near_duplicate_key(section)
    assert near_duplicate_key(lead) != near_duplicate_key("The pod restarts before deploy.")


def test_vault_links_and_breadcrumbs() -> None:
    plain = Settings(_env_file=None)
    assert vault_url(plain, "team", "runbooks/a b.md", "diagnosis") is None
    forge = Settings(_env_file=None, forgejo_url="https://git.example.org/", forgejo_repo="ops/vault")
    assert vault_url(forge, "team", "runbooks/a b.md", "diagnosis") == (
        "https://git.example.org/ops/vault/src/branch/main/team/runbooks/a%20b.md#diagnosis"
    )
    remote = Settings(_env_file=None, vault_remote="https://git.example.org/ops/vault.git")
    assert vault_url(remote, "team", "x.md", "") == "https://git.example.org/ops/vault/src/branch/main/team/x.md"
    secret = Settings(_env_file=None, vault_remote="https://user:token@git.example.org/ops/vault.git")
    assert vault_url(secret, "team", "x.md", "") is None  # never echo credentials
    assert breadcrumb_full("team", "runbooks > Title > Diagnosis", "Diagnosis") == "team > runbooks > Title > Diagnosis"
    assert breadcrumb_full("team", "runbooks > Title", "Steps") == "team > runbooks > Title > Steps"


def test_shared_validation_catches_what_callers_outside_the_api_get_wrong() -> None:
    def bad(**changes: object) -> None:
        with pytest.raises(QueryError):
            validate_request(QueryRequest(**{"query": "pods", "projects": ["p"], **changes}))  # type: ignore[arg-type]

    bad(query="  ")
    bad(query="x" * 10_001)
    bad(method="magic")
    bad(fusion="borda")
    bad(limit=0)
    bad(candidates=5000)
    bad(weights=(0.9, 0.3))
    bad(weights=(1.2, -0.2))
    bad(context_chunks=9)
    bad(filters=LexicalFilters(tags=tuple(f"t{i}" for i in range(21))))
    bad(filters=LexicalFilters(source_pattern=" "))
    validate_request(QueryRequest(query="pods", projects=["p"], weights=(0.25, 0.75)))
    assert parse_since("2024-05-01") == datetime(2024, 5, 1, tzinfo=UTC)
    assert parse_since("2024-05-01T10:00:00Z") == datetime(2024, 5, 1, 10, tzinfo=UTC)
    with pytest.raises(QueryError):
        parse_since("last tuesday")
