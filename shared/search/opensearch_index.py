"""The server lexical engine: OpenSearch, one index per project (``vault_v2-<project>``).

Writes use the service credentials from the settings (basic auth); searches forward the caller's
JWT (``LexicalQuery.bearer_token``) so OpenSearch's own security plugin can enforce the JWT realm.
Every search also filters on the ``project`` keyword, so isolation never rests on index names alone.

Index names carry :data:`MAPPING_VERSION`: after a mapping change the service writes and searches new
indices only, and an operator fills them from the database with
:func:`shared.evaluation.corpus.reindex_lexical` (docs/architecture.md, "OpenSearch parity").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import NotFoundError, TransportError
from opensearchpy.helpers.errors import BulkIndexError

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

BACKEND_NAME = "opensearch"
# Raise it with every INDEX_BODY change an existing index cannot take (a new field, another analyzer).
# Version 1 named indices ``vault-<project>``; the underscore keeps every ``vault-*`` pattern (old
# releases' deletes, an operator's clean-up) off the new indices, and theirs off ours.
MAPPING_VERSION = 2
INDEX_PREFIX = f"vault_v{MAPPING_VERSION}-"
ALL_INDICES = INDEX_PREFIX + "*"
MAX_LIMIT = 1000
BULK_CHUNK_DOCS = 500
BULK_CHUNK_BYTES = 10 * 1024 * 1024
TERMS_BATCH = 1024

# OpenSearch (Lucene 9) rejects a query with more than 1024 leaf clauses in total, and
# multi_match makes one clause per term per field; these caps keep a pasted log excerpt below it
# (200 tokens x 2 fields, plus at most 8 fuzzy words of at most 32 terms each, one leaf per term
# since the constant_score rewrite does not expand them into clauses).
MAX_QUERY_WORDS = 64
MAX_QUERY_TOKENS = 200
MAX_QUERY_WORD_CHARS = 64
# A word's cost is the number of terms STEMMED_ANALYZER makes of it: runs of letters and digits, so
# ``max_connections`` costs 2. Python's alphanumerics lack the Alphabetic marks and symbols (Devanagari
# vowel signs, circled letters), which therefore split a word into more terms here than on the cluster:
# the count errs towards fewer words sent, except that a word made of such symbols alone is left out.
_WORD = re.compile(r"[^\W_]+")

# Tantivy's en_stem (tantivy_index._en_stem_analyzer) rebuilt from OpenSearch's documented parts, so both
# engines make the same terms of the same text: split on every character that is neither alphabetic nor
# numeric (Rust's char::is_alphanumeric is the Unicode Alphabetic property or a number; Java's regex says
# \p{IsAlphabetic} and \p{N}), so snake_case, dotted and kebab-case names fall apart into their words; drop
# long tokens; lowercase; stem with Snowball English (porter2), keeping stop words, which `mem eval` showed
# error-message queries need ("not", "no"). The built-in ``english`` analyzer differs on every step: its
# standard tokenizer keeps ``max_connections`` and ``kube.apiserver`` whole, it drops stop words, strips
# possessives and stems with the original Porter algorithm.
STEMMED_ANALYZER = "poimen_en_stem"
# Tantivy's remove_long(40) drops tokens of 40 bytes or more (UTF-8). The length filter counts characters
# (UTF-16 code units), so max 39 is the same rule for ASCII tokens, while a non-ASCII token of 20 to 39
# characters is kept here and dropped by Tantivy; OpenSearch has no byte-length filter.
MAX_TOKEN_CHARS = 39
ANALYSIS: dict[str, Any] = {
    "tokenizer": {
        "poimen_alphanumeric": {"type": "pattern", "pattern": r"[^\p{IsAlphabetic}\p{N}]+"},
    },
    "filter": {
        "poimen_remove_long": {"type": "length", "max": MAX_TOKEN_CHARS},
        "poimen_porter2": {"type": "snowball", "language": "English"},
    },
    "analyzer": {
        STEMMED_ANALYZER: {
            "type": "custom",
            "tokenizer": "poimen_alphanumeric",
            # Tantivy's order: the length is taken before lowercasing, which can change it.
            "filter": ["poimen_remove_long", "lowercase", "poimen_porter2"],
        }
    },
}
# Every field below names only ``analyzer``, which OpenSearch also applies to query text (no
# ``search_analyzer``), so queries are analysed as the indexed text is.
STEMMED_FIELD = "content.stemmed"

# The fields and weights of Tantivy's TEXT_FIELDS: the chunk's own text, stemmed (it starts with its heading;
# searching section and breadcrumb too repeats a document's title words in every chunk, which `mem eval`
# showed hurts), and the words of its CamelCase identifiers. The unstemmed ``content`` is not searched:
# Tantivy has no such field, and most_fields would count every exact word twice.
TEXT_FIELD_BOOSTS: tuple[tuple[str, float], ...] = (
    (STEMMED_FIELD, 1.0),
    (IDENTIFIER_PARTS_FIELD, IDENTIFIER_PARTS_BOOST),
)
SEARCH_FIELDS: tuple[str, ...] = tuple(
    name if boost == 1.0 else f"{name}^{boost:g}" for name, boost in TEXT_FIELD_BOOSTS
)
# Typos are matched in the stemmed chunk text, as Tantivy does. ``AUTO:<low>,<high>`` is applied to each
# analysed term: exact below low, one edit below high, two from high, which is Tantivy's rule; a word
# shorter than MIN_FUZZY_CHARS is left out whole, as Tantivy leaves out such terms.
FUZZY_FIELD = STEMMED_FIELD
FUZZINESS = f"AUTO:{MIN_FUZZY_CHARS},{TWO_EDITS_MIN_CHARS}"

INDEX_BODY: dict[str, Any] = {
    "settings": {"analysis": ANALYSIS},
    "mappings": {
        "_meta": {"poimen_mapping_version": MAPPING_VERSION},
        "dynamic": "strict",
        "properties": {
            "chunk_id": {"type": "keyword"},
            "project": {"type": "keyword"},
            "source": {"type": "keyword"},
            "content": {
                "type": "text",
                "analyzer": "standard",
                "fields": {"stemmed": {"type": "text", "analyzer": STEMMED_ANALYZER}},
            },
            # Computed client-side by the same function Tantivy uses (lexical.identifier_parts).
            IDENTIFIER_PARTS_FIELD: {"type": "text", "analyzer": STEMMED_ANALYZER},
            "breadcrumb": {
                "type": "text",
                "analyzer": "standard",
                "fields": {"english": {"type": "text", "analyzer": "english"}},
            },
            "section": {
                "type": "text",
                "analyzer": "standard",
                "fields": {"english": {"type": "text", "analyzer": "english"}},
            },
            "level": {"type": "integer"},
            "tags": {"type": "keyword"},
            "updated_at": {"type": "date"},
        },
    },
}


def index_name(project: str) -> str:
    """The index of ``project``: :data:`INDEX_PREFIX` + ``<project>`` lowercased, unsafe characters replaced.

    A name that had to be changed gets a short hash of the original, so ``MyProj`` and
    ``myproj`` never share an index.
    """
    if not isinstance(project, str) or not project:
        raise ValueError("project must be a non-empty string")
    safe = re.sub(r"[^a-z0-9_.-]", "_", project.lower())
    if safe != project or len(safe) > 200:
        digest = hashlib.sha256(project.encode("utf-8")).hexdigest()[:10]
        safe = f"{safe[:200]}-{digest}"
    return INDEX_PREFIX + safe


def glob_to_lucene_regexp(glob: str) -> str:
    """Translate a glob (``fnmatch.fnmatchcase`` semantics) into a Lucene ``regexp`` (always anchored).

    Every non-alphanumeric literal is backslash-escaped, which Lucene accepts for any character;
    queries use ``flags: NONE`` so ``@ & ~ < > #`` have no special meaning either.
    """

    return glob_to_regex(glob, lambda ch: ch if ch.isalnum() else "\\" + ch)


def bounded_query_text(text: str) -> str:
    """The query text cut to a size OpenSearch accepts: distinct words, few enough tokens."""
    words: list[str] = []
    seen: set[str] = set()
    tokens = 0
    for word in text.split():
        word = word[:MAX_QUERY_WORD_CHARS]
        if word in seen:
            continue
        cost = len(_WORD.findall(word))
        if cost == 0:
            continue
        if tokens + cost > MAX_QUERY_TOKENS or len(words) >= MAX_QUERY_WORDS:
            break
        seen.add(word)
        words.append(word)
        tokens += cost
    return " ".join(words)


def fuzzy_clauses(words: Sequence[str]) -> list[dict[str, Any]]:
    """``bool.should`` clauses matching each of ``words`` within a small edit distance, constant-scored.

    One clause per distinct word, at most :data:`MAX_FUZZY_TERMS`, each adding :data:`FUZZY_BOOST`
    when any of the word's analysed terms is near a term of the chunk text: the scoring of Tantivy's
    fuzzy terms. The word is analysed by the cluster (``match``), so its terms are the indexed ones.
    """
    clauses: list[dict[str, Any]] = []
    seen: set[str] = set()
    for word in words:
        if not isinstance(word, str):
            continue
        word = word.strip()[:MAX_QUERY_WORD_CHARS]
        if len(word) < MIN_FUZZY_CHARS or word.lower() in seen:
            continue
        seen.add(word.lower())
        match = {
            "query": word,
            "fuzziness": FUZZINESS,
            "prefix_length": 0,
            "fuzzy_transpositions": True,
            # Every near term counts (as in Tantivy) and none is scored: the clause's score is the boost.
            "fuzzy_rewrite": "constant_score",
        }
        clauses.append({"constant_score": {"filter": {"match": {FUZZY_FIELD: match}}, "boost": FUZZY_BOOST}})
        if len(clauses) >= MAX_FUZZY_TERMS:
            break
    return clauses


def _iso(value: datetime) -> str:
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)).isoformat()


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class OpenSearchLexicalIndex:
    """A :class:`~shared.search.lexical.LexicalIndex` on an OpenSearch cluster."""

    name = BACKEND_NAME

    def __init__(
        self,
        url: str,
        user: str | None = None,
        password: str | None = None,
        verify_certs: bool = True,
        timeout_secs: float = 10.0,
    ) -> None:
        """Build the client (no request is made until the first call)."""
        if not url or not urlsplit(url).hostname:
            raise ValueError(f"MEM_OPENSEARCH_URL is not a valid URL: {url!r}")
        self._url = _redacted(url)
        http_auth = (user, password or "") if user else None
        self._client = OpenSearch(
            hosts=[url],
            http_auth=http_auth,
            verify_certs=verify_certs,
            ssl_show_warn=verify_certs,
            timeout=timeout_secs,
            # Failing fast lets the caller fall back or report; retries belong to the job queue.
            max_retries=0,
            retry_on_timeout=False,
        )
        self._known_indices: set[str] = set()

    # --- plumbing ---------------------------------------------------------------------------

    def _unavailable(self, action: str, exc: Exception) -> LexicalUnavailable:
        if isinstance(exc, OSConnectionError):
            detail = "timed out" if exc.status_code == "TIMEOUT" else "unreachable"
            return LexicalUnavailable(f"OpenSearch at {self._url} {detail} during {action}")
        if isinstance(exc, TransportError):
            reason = exc.error if isinstance(exc.error, str) else type(exc).__name__
            return LexicalUnavailable(
                f"OpenSearch at {self._url} refused {action}: {exc.status_code} {reason}"
            )
        return LexicalUnavailable(f"OpenSearch at {self._url} failed during {action}: {exc}")

    def _ensure_index(self, name: str) -> None:
        if name in self._known_indices:
            return
        try:
            if not self._client.indices.exists(index=name):
                try:
                    self._client.indices.create(index=name, body=INDEX_BODY)
                except TransportError as exc:
                    # Another process created it between our check and our create.
                    if exc.error != "resource_already_exists_exception":
                        raise
        except TransportError as exc:
            raise self._unavailable(f"creating index {name}", exc) from exc
        self._known_indices.add(name)

    # --- writes -----------------------------------------------------------------------------

    def upsert(self, docs: Sequence[LexicalDoc]) -> None:
        """Index (replace by ``_id`` = chunk_id) every chunk with ``_bulk``, then refresh."""
        for doc in docs:
            validate_lexical_doc(doc)
        if not docs:
            return
        names = sorted({index_name(doc.project) for doc in docs})
        for name in names:
            self._ensure_index(name)

        def actions() -> Iterator[dict[str, Any]]:
            for doc in docs:
                yield {
                    "_op_type": "index",
                    "_index": index_name(doc.project),
                    "_id": doc.chunk_id,
                    "_source": {
                        "chunk_id": doc.chunk_id,
                        "project": doc.project,
                        "source": doc.source,
                        "breadcrumb": doc.breadcrumb,
                        "section": doc.section,
                        "content": doc.content,
                        IDENTIFIER_PARTS_FIELD: identifier_parts(doc),
                        "level": doc.level,
                        "tags": list(doc.tags),
                        "updated_at": _iso(doc.updated_at) if doc.updated_at else None,
                    },
                }

        try:
            helpers.bulk(
                self._client, actions(), chunk_size=BULK_CHUNK_DOCS, max_chunk_bytes=BULK_CHUNK_BYTES
            )
            self._client.indices.refresh(index=",".join(names))
        except BulkIndexError as exc:
            first = exc.errors[0] if exc.errors else {}
            raise LexicalUnavailable(
                f"OpenSearch at {self._url} rejected {len(exc.errors)} of {len(docs)} chunks; first: {first}"
            ) from exc
        except TransportError as exc:
            raise self._unavailable("bulk indexing", exc) from exc

    def _delete_by_query(self, index: str, query: dict[str, Any], action: str) -> None:
        try:
            self._client.delete_by_query(
                index=index,
                body={"query": query},
                refresh=True,
                conflicts="proceed",
                ignore_unavailable=True,
                allow_no_indices=True,
            )
        except NotFoundError:
            return  # no index, nothing to delete
        except TransportError as exc:
            raise self._unavailable(action, exc) from exc

    def delete_sources(self, project: str, sources: Sequence[str]) -> None:
        """Remove every chunk of ``sources`` in ``project`` (``_delete_by_query``, refreshed)."""
        name = index_name(project)
        for start in range(0, len(sources), TERMS_BATCH):
            batch = list(sources[start : start + TERMS_BATCH])
            query = {"bool": {"filter": [{"term": {"project": project}}, {"terms": {"source": batch}}]}}
            self._delete_by_query(name, query, "deleting sources")

    def delete_chunks(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id from every project index."""
        for start in range(0, len(chunk_ids), TERMS_BATCH):
            batch = list(chunk_ids[start : start + TERMS_BATCH])
            self._delete_by_query(ALL_INDICES, {"terms": {"chunk_id": batch}}, "deleting chunks")

    # --- reads ------------------------------------------------------------------------------

    @staticmethod
    def _filter_clauses(projects: Sequence[str], filters: LexicalFilters) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"terms": {"project": list(projects)}}]
        if filters.levels:
            out.append({"terms": {"level": [int(level) for level in filters.levels]}})
        if filters.source_pattern:
            regexp = glob_to_lucene_regexp(filters.source_pattern)
            out.append({"regexp": {"source": {"value": regexp, "flags": "NONE"}}})
        if filters.updated_since is not None:
            out.append({"range": {"updated_at": {"gte": _iso(filters.updated_since)}}})
        for tag in filters.tags:
            out.append({"term": {"tags": tag}})
        return out

    def search_body(self, query: LexicalQuery, projects: Sequence[str], text: str) -> dict[str, Any]:
        """The ``_search`` body: one bool query whose ``should`` holds the BM25 ``multi_match`` and the fuzzy
        clauses (at least one must match) and whose ``filter`` holds the project and the filters."""
        should: list[dict[str, Any]] = [
            {"multi_match": {"query": text, "type": "most_fields", "fields": list(SEARCH_FIELDS)}}
        ]
        should.extend(fuzzy_clauses(tuple(query.fuzzy or ())))
        return {
            "size": min(int(query.limit), MAX_LIMIT),
            "_source": ["chunk_id", "project", "source"],
            "track_total_hits": False,
            "query": {
                "bool": {
                    "should": should,
                    # With a filter present OpenSearch would otherwise treat every should clause as optional.
                    "minimum_should_match": 1,
                    "filter": self._filter_clauses(projects, query.filters),
                }
            },
        }

    def search(self, query: LexicalQuery) -> list[LexicalHit]:
        """Best-first hits over the allowed projects' indices, as the caller (JWT) when given."""
        projects = [p for p in query.projects if p]
        if not projects or int(query.limit) <= 0 or not isinstance(query.text, str):
            return []
        text = bounded_query_text(query.text)
        if not text:
            return []
        headers: dict[str, str] = {}
        if query.bearer_token:
            if any(c in query.bearer_token for c in "\r\n"):
                raise ValueError("bearer token must not contain line breaks")
            headers["Authorization"] = f"Bearer {query.bearer_token}"
        try:
            response = self._client.search(
                index=",".join(sorted({index_name(p) for p in projects})),
                body=self.search_body(query, projects, text),
                ignore_unavailable=True,
                allow_no_indices=True,
                headers=headers or None,
            )
        except NotFoundError:
            return []
        except TransportError as exc:
            raise self._unavailable("search", exc) from exc
        hits = []
        for hit in response.get("hits", {}).get("hits", []):
            source = hit.get("_source") or {}
            hits.append(
                LexicalHit(
                    chunk_id=source.get("chunk_id") or hit.get("_id", ""),
                    score=float(hit.get("_score") or 0.0),
                    project=source.get("project", ""),
                    source=source.get("source", ""),
                )
            )
        return hits

    def count(self, project: str | None = None) -> int:
        """``_count`` of chunks in one project's index, or across all project indices."""
        index = index_name(project) if project is not None else ALL_INDICES
        body = {"query": {"term": {"project": project}}} if project is not None else None
        try:
            response = self._client.count(
                index=index, body=body, ignore_unavailable=True, allow_no_indices=True
            )
        except NotFoundError:
            return 0
        except TransportError as exc:
            raise self._unavailable("count", exc) from exc
        return int(response.get("count", 0))

    def health(self) -> dict[str, object]:
        """Backend name, cluster status and document count; raises when the cluster is red or down."""
        try:
            cluster = self._client.cluster.health()
        except TransportError as exc:
            raise self._unavailable("health check", exc) from exc
        status = cluster.get("status", "unknown")
        if status == "red":
            raise LexicalUnavailable(f"OpenSearch at {self._url} cluster status is red")
        return {"backend": BACKEND_NAME, "docs": self.count(), "status": status, "url": self._url}
