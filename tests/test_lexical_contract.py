"""The lexical engine contract, run against every backend available here.

Tantivy always runs. OpenSearch runs when ``MEM_OPENSEARCH_URL`` points at a real cluster (with
``MEM_OPENSEARCH_USER``/``MEM_OPENSEARCH_PASSWORD`` when it needs them); otherwise its parameter
skips. Every test uses fresh project names, so a shared cluster is safe to run against.
"""

from __future__ import annotations

import fcntl
import fnmatch
import multiprocessing
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from shared.config import Settings
from shared.search.lexical import (
    LexicalDoc,
    LexicalFilters,
    LexicalIndex,
    LexicalQuery,
    LexicalUnavailable,
)
from shared.search.lexical_factory import get_lexical_index, reset_lexical_indexes

OPENSEARCH_URL = os.environ.get("MEM_OPENSEARCH_URL")


@dataclass
class Backend:
    """A backend under test, the settings that build it, and a project-name prefix unique to the test."""

    index: LexicalIndex
    settings: Settings
    prefix: str

    def project(self, name: str) -> str:
        """A project name unique to this test."""
        return f"{self.prefix}-{name}"


def _settings(engine: str, tmp_path: Path) -> Settings:
    if engine == "tantivy":
        return Settings(data_dir=tmp_path, lexical_backend="tantivy")
    return Settings(data_dir=tmp_path, lexical_backend="opensearch")


@pytest.fixture(
    params=[
        "tantivy",
        pytest.param(
            "opensearch",
            marks=pytest.mark.skipif(
                not OPENSEARCH_URL,
                reason="MEM_OPENSEARCH_URL is not set: no OpenSearch cluster to test against",
            ),
        ),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh engine of each available kind."""
    reset_lexical_indexes()
    settings = _settings(request.param, tmp_path)
    index = get_lexical_index(settings)
    b = Backend(index=index, settings=settings, prefix=f"t{uuid.uuid4().hex[:10]}")
    yield b
    if request.param == "opensearch":
        from shared.search.opensearch_index import ALL_INDICES

        client = index._client  # type: ignore[attr-defined]
        names = [n for n in client.indices.get(index=ALL_INDICES) if b.prefix in n]
        if names:
            client.indices.delete(index=",".join(names))
    reset_lexical_indexes()


def doc(
    chunk_id: str,
    project: str,
    content: str,
    *,
    source: str = "runbooks/ci.md",
    section: str = "Notes",
    breadcrumb: str = "Runbooks > CI",
    level: int = 2,
    tags: tuple[str, ...] = (),
    updated_at: datetime | None = None,
) -> LexicalDoc:
    """A chunk with sensible defaults."""
    return LexicalDoc(chunk_id, project, source, breadcrumb, section, content, level, tags, updated_at)


def ids(index: LexicalIndex, text: str, projects: list[str], **kw: object) -> list[str]:
    """Chunk ids of a search, best first."""
    return [h.chunk_id for h in index.search(LexicalQuery(text=text, projects=projects, **kw))]


# --- core behaviour ----------------------------------------------------------------------------


def test_finds_by_stemmed_term_and_ranks_best_first(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert(
        [
            doc("c1", p, "Restarting the runner fixes flaky jobs; restart the runner daemon first."),
            doc("c2", p, "The cache is warmed nightly by the runner."),
            doc("c3", p, "Nothing to see here about databases."),
        ]
    )
    hits = backend.index.search(LexicalQuery(text="restarted runners", projects=[p]))
    assert [h.chunk_id for h in hits][:2] == ["c1", "c2"]
    assert "c3" not in [h.chunk_id for h in hits]
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert hits[0].project == p and hits[0].source == "runbooks/ci.md"


def test_the_chunk_text_is_what_matches(backend: Backend) -> None:
    # Chunks carry their heading line in their text; the section and breadcrumb fields are metadata, not
    # searched (searching them repeated title words in every chunk and measured worse in `mem eval`).
    p = backend.project("a")
    body = "general text about the system and its parts"
    backend.index.upsert(
        [
            doc("in-content", p, body + " kubernetes", section="Overview", breadcrumb="Guide"),
            doc("in-section", p, body + " overview", section="Kubernetes", breadcrumb="Guide"),
        ]
    )
    assert ids(backend.index, "kubernetes", [p]) == ["in-content"]


def test_upsert_replaces_by_chunk_id(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc("c1", p, "postgres vacuum stalls")])
    backend.index.upsert([doc("c1", p, "redis eviction storms")])
    assert ids(backend.index, "postgres", [p]) == []
    assert ids(backend.index, "redis", [p]) == ["c1"]
    assert backend.index.count(p) == 1


def test_duplicate_ids_in_one_batch_keep_the_last(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc("c1", p, "alpha token"), doc("c1", p, "omega token")])
    assert backend.index.count(p) == 1
    assert ids(backend.index, "omega", [p]) == ["c1"]
    assert ids(backend.index, "alpha", [p]) == []


def test_search_never_leaves_the_allowed_projects(backend: Backend) -> None:
    a, b = backend.project("a"), backend.project("b")
    backend.index.upsert([doc("a1", a, "deploy rollback steps"), doc("b1", b, "deploy rollback steps")])
    assert ids(backend.index, "rollback", [a]) == ["a1"]
    assert sorted(ids(backend.index, "rollback", [a, b])) == ["a1", "b1"]
    assert ids(backend.index, "rollback", []) == []
    assert ids(backend.index, "rollback", [backend.project("unknown")]) == []


def test_limit_is_respected(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc(f"c{i}", p, f"timeout in step {i}") for i in range(12)])
    assert len(ids(backend.index, "timeout", [p], limit=5)) == 5
    assert ids(backend.index, "timeout", [p], limit=0) == []


# --- filters -----------------------------------------------------------------------------------


def test_filter_levels(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc(f"l{i}", p, "disk full alert", level=i) for i in range(1, 5)])
    got = ids(backend.index, "disk", [p], filters=LexicalFilters(levels=(2, 4)))
    assert sorted(got) == ["l2", "l4"]


def test_filter_source_pattern(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert(
        [
            doc("r1", p, "oom killer", source="runbooks/memory.md"),
            doc("r2", p, "oom killer", source="runbooks/deep/nested.md"),
            doc("s1", p, "oom killer", source="skills/memory.md"),
        ]
    )
    assert sorted(ids(backend.index, "oom", [p], filters=LexicalFilters(source_pattern="runbooks/*"))) == [
        "r1",
        "r2",
    ]
    assert sorted(ids(backend.index, "oom", [p], filters=LexicalFilters(source_pattern="*/memory.md"))) == [
        "r1",
        "s1",
    ]
    assert ids(backend.index, "oom", [p], filters=LexicalFilters(source_pattern="runbooks")) == []


GLOB_PATHS = [
    "runbooks/ci.md",
    "runbooks/deep/x.md",
    "skills/a-b.md",
    "notes/v1.2 (draft).md",
    "odd/[x]+y.md",
    "unicode/café.md",
    "q/a?b.md",
]
GLOB_PATTERNS = [
    "runbooks/*",
    "*.md",
    "skills/?-?.md",
    "*[!m]d",
    "notes/v1.2 (*",
    "odd/[[]x]+y.md",
    "*/caf?.md",
    "[rs]*",
    "q/a[?]b.md",
    "odd/[x",
    "*[a-c]-*",
]


def test_source_pattern_agrees_with_fnmatch(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc(f"g{i}", p, "shared term", source=path) for i, path in enumerate(GLOB_PATHS)])
    for pattern in GLOB_PATTERNS:
        expected = sorted(f"g{i}" for i, path in enumerate(GLOB_PATHS) if fnmatch.fnmatchcase(path, pattern))
        got = sorted(ids(backend.index, "shared", [p], filters=LexicalFilters(source_pattern=pattern)))
        assert got == expected, pattern


def test_filter_updated_since(backend: Backend) -> None:
    p = backend.project("a")
    base = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    backend.index.upsert(
        [
            doc("old", p, "flaky test quarantine", updated_at=base - timedelta(days=3)),
            doc("new", p, "flaky test quarantine", updated_at=base + timedelta(hours=1)),
            doc("undated", p, "flaky test quarantine"),
        ]
    )
    assert ids(backend.index, "flaky", [p], filters=LexicalFilters(updated_since=base)) == ["new"]
    # An aware datetime in another zone means the same instant.
    plus2 = base.astimezone(timezone(timedelta(hours=2)))
    assert ids(backend.index, "flaky", [p], filters=LexicalFilters(updated_since=plus2)) == ["new"]


def test_filter_tags_all_of(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert(
        [
            doc("both", p, "cert renewal", tags=("tls", "ops")),
            doc("one", p, "cert renewal", tags=("tls",)),
            doc("none", p, "cert renewal"),
        ]
    )
    assert ids(backend.index, "cert", [p], filters=LexicalFilters(tags=("tls", "ops"))) == ["both"]
    assert sorted(ids(backend.index, "cert", [p], filters=LexicalFilters(tags=("tls",)))) == ["both", "one"]


# --- deletes and counts ------------------------------------------------------------------------


def test_delete_sources_only_touches_that_project(backend: Backend) -> None:
    a, b = backend.project("a"), backend.project("b")
    backend.index.upsert(
        [
            doc("a1", a, "nginx reload", source="runbooks/web.md"),
            doc("a2", a, "nginx reload", source="runbooks/web.md"),
            doc("a3", a, "nginx reload", source="runbooks/other.md"),
            doc("b1", b, "nginx reload", source="runbooks/web.md"),
        ]
    )
    backend.index.delete_sources(a, ["runbooks/web.md", "runbooks/missing.md"])
    assert ids(backend.index, "nginx", [a]) == ["a3"]
    assert ids(backend.index, "nginx", [b]) == ["b1"]
    assert backend.index.count(a) == 1
    backend.index.delete_sources(a, [])


def test_delete_chunks(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc("c1", p, "gpu driver"), doc("c2", p, "gpu driver")])
    backend.index.delete_chunks(["c1", "does-not-exist"])
    assert ids(backend.index, "gpu", [p]) == ["c2"]
    backend.index.delete_chunks([])


def test_count_per_project_and_total(backend: Backend) -> None:
    a, b = backend.project("a"), backend.project("b")
    before = backend.index.count()
    backend.index.upsert([doc("a1", a, "x one"), doc("a2", a, "x two"), doc("b1", b, "x three")])
    assert backend.index.count(a) == 2
    assert backend.index.count(b) == 1
    assert backend.index.count(backend.project("none")) == 0
    assert backend.index.count() == before + 3


def test_health_reports_backend_and_docs(backend: Backend) -> None:
    backend.index.upsert([doc("c1", backend.project("a"), "hello world")])
    health = backend.index.health()
    assert health["backend"] == backend.index.name
    assert isinstance(health["docs"], int) and health["docs"] >= 1


# --- hostile input -----------------------------------------------------------------------------

HOSTILE_QUERIES = [
    "+",
    ":",
    '"',
    '"unclosed phrase',
    "AND",
    "OR NOT AND",
    "title:foo",
    "foo:bar:baz",
    "(((",
    "a~2 b^3 c*",
    "[1 TO 5]",
    "\\",
    "‮ü∂ 漢字 🚀",
    "\x00\x01",
    "",
    "   ",
    "word " * 20_000,
    "".join(chr(0x4E00 + i % 2000) for i in range(100_000)),
    " ".join(f"term{i}" for i in range(15_000)),
]


@pytest.mark.parametrize("text", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_query_text_never_crashes(backend: Backend, text: str) -> None:
    p = backend.project("a")
    backend.index.upsert([doc("c1", p, "foo bar baz title word term1")])
    hits = backend.index.search(LexicalQuery(text=text, projects=[p]))
    assert isinstance(hits, list)


def test_operator_words_are_plain_terms(backend: Backend) -> None:
    p = backend.project("a")
    backend.index.upsert([doc("c1", p, "retry the flaky job"), doc("c2", p, "nothing related")])
    assert ids(backend.index, "+retry AND -job:", [p]) == ["c1"]


@pytest.mark.parametrize(
    "bad",
    [
        doc("", "p", "x"),
        doc("c", "", "x"),
        LexicalDoc("c", "p", "", "b", "s", "x", 1),
        LexicalDoc("c", "p", "s.md", "b", "s", "x", "2"),  # type: ignore[arg-type]
        LexicalDoc("c", "p", "s.md", "b", "s", "x", 1, (), "2024-01-01"),  # type: ignore[arg-type]
    ],
)
def test_bad_documents_are_rejected_clearly(backend: Backend, bad: LexicalDoc) -> None:
    with pytest.raises(ValueError, match="LexicalDoc"):
        backend.index.upsert([bad])


# --- several processes -------------------------------------------------------------------------


def _engine_of(settings: Settings) -> tuple[str, str]:
    return settings.lexical_engine, str(settings.data_dir)


def _write_in_child(engine: str, data_dir: str, project: str, start: int, batches: int, size: int) -> None:
    """Runs in a spawned process: write ``batches`` batches of chunks through the factory."""
    settings = Settings(data_dir=Path(data_dir), lexical_backend=engine)  # type: ignore[arg-type]
    index = get_lexical_index(settings)
    for b in range(batches):
        first = start + b * size
        index.upsert([doc(f"w{first + i}", project, f"worker payload {first + i}") for i in range(size)])


def _run_children(backend: Backend, jobs: list[tuple[int, int, int]], project: str) -> None:
    engine, data_dir = _engine_of(backend.settings)
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_write_in_child, args=(engine, data_dir, project, start, batches, size))
        for start, batches, size in jobs
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()
        assert proc.exitcode == 0, f"writer process failed with exit code {proc.exitcode}"


def test_documents_written_by_another_process_are_searchable(backend: Backend) -> None:
    p = backend.project("a")
    assert ids(backend.index, "payload", [p]) == []  # the reader is open before the write
    _run_children(backend, [(0, 1, 3)], p)
    assert sorted(ids(backend.index, "payload", [p])) == ["w0", "w1", "w2"]
    assert backend.index.count(p) == 3


def test_concurrent_writer_processes_take_turns(backend: Backend) -> None:
    p = backend.project("a")
    _run_children(backend, [(0, 4, 25), (1000, 4, 25), (2000, 4, 25)], p)
    assert backend.index.count(p) == 300
    assert len(ids(backend.index, "payload", [p], limit=1000)) == 300


# --- Tantivy-specific behaviour ----------------------------------------------------------------


def test_tantivy_writer_waits_for_the_lock_with_a_deadline(tmp_path: Path) -> None:
    from shared.search.tantivy_index import LOCK_FILE_NAME, TantivyLexicalIndex

    index = TantivyLexicalIndex(tmp_path / "tantivy", lock_timeout_secs=0.3)
    with open(tmp_path / "tantivy" / LOCK_FILE_NAME, "a+") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(LexicalUnavailable, match="timed out"):
            index.upsert([doc("c1", "p", "blocked write")])
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    index.upsert([doc("c1", "p", "unblocked write")])
    assert ids(index, "unblocked", ["p"]) == ["c1"]


def test_tantivy_index_with_another_schema_is_reported(tmp_path: Path) -> None:
    import tantivy

    from shared.search.tantivy_index import TantivyLexicalIndex

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("something_else", stored=True)
    (tmp_path / "tantivy").mkdir()
    tantivy.Index(builder.build(), path=str(tmp_path / "tantivy"))
    with pytest.raises(LexicalUnavailable, match="reindex"):
        TantivyLexicalIndex(tmp_path / "tantivy")


def test_tantivy_index_lives_under_the_data_dir(tmp_path: Path) -> None:
    reset_lexical_indexes()
    settings = Settings(data_dir=tmp_path, lexical_backend="tantivy")
    index = get_lexical_index(settings)
    assert get_lexical_index(settings) is index
    index.upsert([doc("c1", "p", "persisted text")])
    assert (tmp_path / "tantivy" / "meta.json").exists()
    reset_lexical_indexes()
    assert get_lexical_index(settings).count("p") == 1
    reset_lexical_indexes()
