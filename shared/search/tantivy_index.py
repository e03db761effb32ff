"""The embedded lexical engine: a Tantivy BM25 index on disk under ``<data_dir>/tantivy/``.

Several processes share one index directory: the API process searches it, worker processes write
it. Tantivy allows one writer per index and fails fast (``LockBusy``) when another process holds
it, so writers queue on an ``fcntl.flock`` of a lock file in the index directory; readers reload
before each search so a commit made by another process is visible to the next query.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import tantivy
from tantivy import Document, FieldType, Occur, Query

from shared.search.glob import glob_to_regex
from shared.search.lexical import (
    FUZZY_BOOST,
    IDENTIFIER_PARTS_BOOST,
    IDENTIFIER_PARTS_FIELD,
    MAX_FUZZY_TERMS,
    MIN_FUZZY_CHARS,
    TWO_EDITS_MIN_CHARS,
    LexicalDoc,
    LexicalFilters,
    LexicalHit,
    LexicalQuery,
    LexicalUnavailable,
    identifier_parts,
    validate_lexical_doc,
)

BACKEND_NAME = "tantivy"
LOCK_FILE_NAME = ".poimen-writer.lock"

# A query longer than this is cut: BM25 over thousands of distinct terms costs time and ranks no better.
MAX_QUERY_CHARS = 10_000
MAX_QUERY_TERMS = 256
MAX_LIMIT = 1000
WRITER_HEAP_BYTES = 64_000_000
WRITER_THREADS = 2
DEFAULT_LOCK_TIMEOUT_SECS = 120.0


@dataclass(frozen=True)
class TextField:
    """A searchable text field: its name, tokenizer, query boost and where its value comes from.

    Extra fields (e.g. identifier-aware tokenisation of ``snake_case``/``CamelCase`` names) are
    added by appending to :data:`TEXT_FIELDS`, registering their tokenizer in
    :func:`_register_tokenizers` and giving :func:`_query_analyzers` the same analyzer.
    Changing the list changes the schema: an existing index must then be rebuilt.
    """

    name: str
    tokenizer: str
    boost: float
    value: Callable[[LexicalDoc], str]


# The identifier boost and the fuzzy constants are shared with OpenSearch (shared.search.lexical).
# IDENTIFIER_PARTS_BOOST: 0.5 / 1.0 / 2.0 measured; 2.0 helps alert names a little more but costs
# SciFact 0.06 nDCG@10. FUZZY_BOOST: enough to surface the one runbook a mistyped alert name points
# to, too little to reorder documents that match the words exactly.
FUZZY_FIELDS = ("content",)

# Only the chunk's own text is searched. Chunks already carry their heading line (and the L0 chunk the
# document title); searching the section and breadcrumb fields as well repeats the title and folder
# words in every chunk of a document, and measured by `mem eval` (nDCG@10, lexical) that hurt on every
# set: SciFact train 0.578 -> 0.688, alert names 0.951/0.890/0.792 -> 0.975/0.960/0.900 (whole, words,
# typo), the sample vault 0.885 -> 0.982. See docs/evaluation.md.
TEXT_FIELDS: tuple[TextField, ...] = (
    TextField("content", "en_stem", 1.0, lambda d: d.content),
    # Identifier-aware matching: the words of CamelCase names (KubePodCrashLooping -> kube pod crash
    # loop), so "pod crash looping" finds the runbook while the whole name still matches in `content`.
    # snake_case and kebab-case need no field: the tokenizer already splits on punctuation.
    TextField(IDENTIFIER_PARTS_FIELD, "en_stem", IDENTIFIER_PARTS_BOOST, identifier_parts),
)


def build_schema() -> tantivy.Schema:
    """The index schema: raw keys for exact filters, stemmed text for BM25, fast fields for ranges."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("project", stored=True, tokenizer_name="raw")
    builder.add_text_field("source", stored=True, tokenizer_name="raw")
    for field in TEXT_FIELDS:
        builder.add_text_field(field.name, tokenizer_name=field.tokenizer)
    builder.add_integer_field("level", indexed=True, fast=True)
    builder.add_text_field("tags", tokenizer_name="raw")
    builder.add_date_field("updated_at", indexed=True, fast=True)
    return builder.build()


def _register_tokenizers(index: tantivy.Index) -> None:
    """Register custom analyzers on an opened index (none yet: ``en_stem`` and ``raw`` are built in)."""


def _en_stem_analyzer() -> tantivy.TextAnalyzer:
    """The same chain as Tantivy's built-in ``en_stem`` tokenizer, so query terms match indexed terms."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _query_analyzers() -> dict[str, tantivy.TextAnalyzer]:
    """One analyzer per tokenizer name used by :data:`TEXT_FIELDS`."""
    return {"en_stem": _en_stem_analyzer()}


# Meta-characters of Rust's regex syntax (tantivy's RegexQuery); escaping other characters is
# pointless and `\<`/`\>` would even mean word boundaries there.
_RUST_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def glob_to_tantivy_regex(glob: str) -> str:
    """Translate a glob (``fnmatch.fnmatchcase`` semantics) into an anchored tantivy regex.

    ``*`` matches any run of characters including ``/``, ``?`` one character, ``[seq]`` and
    ``[!seq]`` a character class; an unclosed ``[`` is literal, as in :mod:`fnmatch`.
    Hand-written because :func:`fnmatch.translate` emits Python-only syntax (``(?s:...)\\Z``).
    """

    return glob_to_regex(glob, lambda ch: "\\" + ch if ch in _RUST_REGEX_META else ch)


def _validate_doc(doc: LexicalDoc) -> None:
    validate_lexical_doc(doc)
    if doc.updated_at is not None and not tantivy.MIN_DATETIME <= _as_utc(doc.updated_at) <= tantivy.MAX_DATETIME:
        raise ValueError(f"LexicalDoc.updated_at is out of range (chunk {doc.chunk_id!r})")


def _as_utc(value: datetime) -> datetime:
    # Naive datetimes are taken as UTC, the same rule tantivy applies when indexing them.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class TantivyLexicalIndex:
    """A :class:`~shared.search.lexical.LexicalIndex` on an embedded Tantivy index."""

    name = BACKEND_NAME

    def __init__(self, index_dir: Path, lock_timeout_secs: float = DEFAULT_LOCK_TIMEOUT_SECS) -> None:
        """Open (or create) the index in ``index_dir``; raise :class:`LexicalUnavailable` if impossible."""
        self._dir = Path(index_dir)
        self._lock_timeout = lock_timeout_secs
        self._thread_lock = threading.Lock()
        self._schema = build_schema()
        self._analyzers = _query_analyzers()
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LexicalUnavailable(f"cannot create the tantivy index directory {self._dir}: {exc}") from exc
        # Creating the index writes meta.json: do it under the writer lock so two processes starting
        # at once do not both create it.
        with self._write_lock():
            self._index = self._open_index()
        _register_tokenizers(self._index)
        self._index.config_reader(reload_policy="Manual")

    # --- opening and locking ----------------------------------------------------------------

    def _open_index(self) -> tantivy.Index:
        path = str(self._dir)
        try:
            if tantivy.Index.exists(path) and not tantivy.Index.is_compatible(path):
                raise LexicalUnavailable(
                    f"the tantivy index in {path} was written by an incompatible tantivy version; "
                    "remove the directory and reindex"
                )
            return tantivy.Index(self._schema, path=path, reuse=True)
        except ValueError as exc:
            if "schema does not match" in str(exc):
                raise LexicalUnavailable(
                    f"the tantivy index in {path} has an older schema; remove the directory and reindex"
                ) from exc
            raise LexicalUnavailable(f"cannot open the tantivy index in {path}: {exc}") from exc
        except OSError as exc:
            raise LexicalUnavailable(f"cannot open the tantivy index in {path}: {exc}") from exc

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        """Hold this process's and every other process's exclusive right to write the index."""
        deadline = time.monotonic() + self._lock_timeout
        if not self._thread_lock.acquire(timeout=self._lock_timeout):
            raise LexicalUnavailable(f"timed out waiting for the tantivy writer lock in {self._dir}")
        try:
            fd = os.open(self._dir / LOCK_FILE_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                delay = 0.005
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                            raise LexicalUnavailable(f"cannot lock {self._dir}: {exc}") from exc
                    if time.monotonic() >= deadline:
                        raise LexicalUnavailable(
                            f"timed out after {self._lock_timeout:.0f}s waiting for another process "
                            f"writing the tantivy index in {self._dir}"
                        )
                    # Polling because flock has no timeout; the backoff keeps a long wait cheap.
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        finally:
            self._thread_lock.release()

    @contextmanager
    def _writer(self) -> Iterator[tantivy.IndexWriter]:
        """An index writer, committed and closed (merges finished) before the lock is released."""
        with self._write_lock():
            try:
                writer = self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=WRITER_THREADS)
            except ValueError as exc:
                raise LexicalUnavailable(f"cannot open a tantivy writer on {self._dir}: {exc}") from exc
            try:
                yield writer
                try:
                    writer.commit()
                except (ValueError, OSError) as exc:
                    raise LexicalUnavailable(
                        f"cannot commit to the tantivy index in {self._dir}: {exc}"
                    ) from exc
            except BaseException:
                writer.rollback()
                raise
            finally:
                # Consumes the writer and releases tantivy's own lock file.
                writer.wait_merging_threads()
            self._index.reload()

    def _searcher(self) -> tantivy.Searcher:
        # A manual reload per query (~30 µs) picks up commits made by other processes at once.
        try:
            self._index.reload()
        except (ValueError, OSError):
            # Another process's merge can remove a segment between reading meta.json and opening it.
            try:
                self._index.reload()
            except (ValueError, OSError) as exc:
                raise LexicalUnavailable(f"cannot read the tantivy index in {self._dir}: {exc}") from exc
        return self._index.searcher()

    # --- writes -----------------------------------------------------------------------------

    def _to_document(self, doc: LexicalDoc) -> Document:
        out = Document()
        out.add_text("chunk_id", doc.chunk_id)
        out.add_text("project", doc.project)
        out.add_text("source", doc.source)
        for field in TEXT_FIELDS:
            out.add_text(field.name, field.value(doc) or "")
        out.add_integer("level", doc.level)
        for tag in doc.tags:
            out.add_text("tags", tag)
        if doc.updated_at is not None:
            out.add_date("updated_at", _as_utc(doc.updated_at))
        return out

    def upsert(self, docs: Sequence[LexicalDoc]) -> None:
        """Replace each chunk (delete by ``chunk_id`` term, then add) and commit before returning."""
        for doc in docs:
            _validate_doc(doc)
        if not docs:
            return
        with self._writer() as writer:
            for doc in docs:
                writer.delete_documents_by_term("chunk_id", doc.chunk_id)
                writer.add_document(self._to_document(doc))

    def delete_sources(self, project: str, sources: Sequence[str]) -> None:
        """Remove every chunk whose (project, source) is among ``sources``."""
        if not sources:
            return
        project_q = Query.term_query(self._schema, "project", project)
        with self._writer() as writer:
            for start in range(0, len(sources), 1024):
                batch = list(sources[start : start + 1024])
                source_q = Query.term_set_query(self._schema, "source", batch)
                writer.delete_documents_by_query(
                    Query.boolean_query([(Occur.Must, project_q), (Occur.Must, source_q)])
                )

    def delete_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id (unknown ids are ignored)."""
        if not chunk_ids:
            return
        with self._writer() as writer:
            for chunk_id in chunk_ids:
                writer.delete_documents_by_term("chunk_id", chunk_id)

    # --- reads ------------------------------------------------------------------------------

    def _fuzzy_clauses(self, words: Sequence[str]) -> list[tuple[Occur, Query]]:
        """One-edit (two for long words) matches of each analysed term of ``words``, constant-scored."""
        terms: list[str] = []
        for word in words[:MAX_FUZZY_TERMS]:
            for term in self._analyzers["en_stem"].analyze(word[:200]):
                if len(term) >= MIN_FUZZY_CHARS and term not in terms:
                    terms.append(term)
        clauses: list[tuple[Occur, Query]] = []
        for term in terms[:MAX_FUZZY_TERMS]:
            distance = 2 if len(term) >= TWO_EDITS_MIN_CHARS else 1
            for field in FUZZY_FIELDS:
                fuzzy = Query.fuzzy_term_query(self._schema, field, term, distance=distance)
                clauses.append((Occur.Should, Query.const_score_query(fuzzy, FUZZY_BOOST)))
        return clauses

    def _text_query(self, text: str) -> Query | None:
        """A BM25 disjunction of the analysed query terms over every text field, or None if no terms.

        The query text is analysed, never parsed: user input like ``+``, ``:`` or ``"`` has no
        syntax to break, and the terms go through the same analyzer as the indexed text.
        """
        clauses: list[tuple[Occur, Query]] = []
        seen: dict[str, set[str]] = {}
        text = text[:MAX_QUERY_CHARS]
        for field in TEXT_FIELDS:
            terms = seen.get(field.tokenizer)
            if terms is None:
                terms = set()
                for token in self._analyzers[field.tokenizer].analyze(text):
                    if len(terms) >= MAX_QUERY_TERMS:
                        break
                    terms.add(token)
                seen[field.tokenizer] = terms
            for term in sorted(terms):
                q = Query.term_query(self._schema, field.name, term)
                clauses.append((Occur.Should, Query.boost_query(q, field.boost) if field.boost != 1.0 else q))
        return Query.boolean_query(clauses) if clauses else None

    def _filter_queries(self, projects: Sequence[str], filters: LexicalFilters) -> list[Query]:
        s = self._schema
        out = [Query.term_set_query(s, "project", list(projects))]
        if filters.levels:
            out.append(Query.term_set_query(s, "level", [int(level) for level in filters.levels]))
        if filters.source_pattern:
            # A regex query over the source terms is exact however rare the pattern is; a
            # post-filter over a bounded candidate set would silently drop matches.
            out.append(Query.regex_query(s, "source", glob_to_tantivy_regex(filters.source_pattern)))
        if filters.updated_since is not None:
            since = min(max(_as_utc(filters.updated_since), tantivy.MIN_DATETIME), tantivy.MAX_DATETIME)
            out.append(Query.range_query(s, "updated_at", FieldType.Date, lower_bound=since))
        for tag in filters.tags:
            out.append(Query.term_query(s, "tags", tag))
        return out

    def search(self, query: LexicalQuery) -> list[LexicalHit]:
        """Best-first BM25 hits for ``query.text`` within ``query.projects``, honouring the filters."""
        projects = [p for p in query.projects if p]
        limit = min(int(query.limit), MAX_LIMIT)
        if not projects or limit <= 0 or not isinstance(query.text, str):
            return []
        text_q = self._text_query(query.text)
        if text_q is None:
            return []
        fuzzy = self._fuzzy_clauses(tuple(getattr(query, "fuzzy", ()) or ()))
        if fuzzy:
            text_q = Query.boolean_query([(Occur.Should, text_q), *fuzzy])
        try:
            filter_qs = self._filter_queries(projects, query.filters)
        except ValueError as exc:
            raise ValueError(f"bad search filter: {exc}") from exc
        # Filters must match but add nothing to the BM25 score.
        combined = Query.boolean_query(
            [(Occur.Must, text_q)] + [(Occur.Must, Query.const_score_query(f, 0.0)) for f in filter_qs]
        )
        searcher = self._searcher()
        try:
            result = searcher.search(combined, limit=limit, count=False)
            hits = []
            for score, address in result.hits:
                stored = searcher.doc(address)
                hits.append(
                    LexicalHit(
                        chunk_id=stored.get_first("chunk_id"),
                        score=float(score),
                        project=stored.get_first("project") or "",
                        source=stored.get_first("source") or "",
                    )
                )
        except (ValueError, OSError) as exc:
            raise LexicalUnavailable(f"tantivy search failed: {exc}") from exc
        return hits

    def count(self, project: str | None = None) -> int:
        """How many live chunks are indexed, in ``project`` or in all projects."""
        searcher = self._searcher()
        if project is None:
            return int(searcher.num_docs)
        try:
            result = searcher.search(Query.term_query(self._schema, "project", project), limit=1, count=True)
        except (ValueError, OSError) as exc:
            raise LexicalUnavailable(f"tantivy count failed: {exc}") from exc
        return int(result.count or 0)

    def health(self) -> dict[str, object]:
        """Backend name, document and segment counts, index path."""
        searcher = self._searcher()
        return {
            "backend": BACKEND_NAME,
            "docs": int(searcher.num_docs),
            "segments": int(searcher.num_segments),
            "path": str(self._dir),
        }
