"""A real HTTP stand-in for the OpenSearch REST calls the lexical engine makes.

It serves the documented request and response shapes of: index exists/create, ``_bulk``,
``_refresh``, ``_search``, ``_delete_by_query``, ``_count`` and ``_cluster/health``; it checks each
request strictly and records every deviation in :attr:`OpenSearchStandIn.violations` (and answers
400), so a test fails when the client sends a shape a real cluster would reject, or one it would
accept but silently match nothing with (a query on an unmapped field). It keeps documents and
applies filters so writes are observable, and it evaluates the query clauses the engine sends
(``bool`` should/must/filter with ``minimum_should_match``, ``multi_match`` field boosts,
``constant_score``, ``match`` with ``fuzziness``) on the terms the mapping's analyzers make: it checks
the index's ``settings.analysis`` against the documented definitions (pattern tokenizer; length,
lowercase and snowball filters; custom analyzers and the names they refer to) and runs them, with the
built-in ``standard`` and ``english`` analyzers approximated. It does not rank by BM25: a
``multi_match`` field scores its boost per distinct query term it holds, a ``constant_score`` its
boost. No OpenSearch server can run in CI; the contract suite covers a real one when
``MEM_OPENSEARCH_URL`` is set.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import regex
import Stemmer

REQUIRED_SOURCE_FIELDS = {
    "chunk_id": str,
    "project": str,
    "source": str,
    "breadcrumb": str,
    "section": str,
    "content": str,
    "identifier_parts": str,
    "level": int,
    "tags": list,
    "updated_at": (str, type(None)),
}
REQUIRED_MAPPING_TYPES = {
    "chunk_id": "keyword",
    "project": "keyword",
    "source": "keyword",
    "content": "text",
    "identifier_parts": "text",
    "breadcrumb": "text",
    "section": "text",
    "level": "integer",
    "tags": "keyword",
    "updated_at": "date",
}
_INVALID_INDEX_CHARS = set(' \\/*?"<>|,#:')
MULTI_MATCH_TYPES = {"best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix"}
BOOL_KEYS = {"must", "should", "filter", "must_not", "minimum_should_match", "boost", "_name"}
# The match query's documented parameters.
MATCH_KEYS = {
    "query", "analyzer", "auto_generate_synonyms_phrase_query", "boost", "enable_position_increments",
    "fuzziness", "fuzzy_rewrite", "fuzzy_transpositions", "lenient", "max_expansions",
    "minimum_should_match", "operator", "prefix_length", "zero_terms_query", "_name",
}
_FUZZY_REWRITE = re.compile(
    r"constant_score|scoring_boolean|constant_score_boolean|top_terms_(?:boost_|blended_freqs_)?[1-9]\d*"
)
_FUZZINESS = re.compile(r"[012]|AUTO(?::(\d+),(\d+))?")
_FIELD_BOOST = re.compile(r"([A-Za-z_][\w.]*)(?:\^(\d+(?:\.\d+)?))?")


class Violation(Exception):
    """A request a real OpenSearch would reject or that breaks the engine's contract."""


@dataclass
class Recorded:
    """One request as the stand-in saw it."""

    method: str
    path: str
    params: dict[str, str]
    authorization: str | None
    body: bytes


@dataclass
class OpenSearchStandIn:
    """State and expectations of the stand-in; ``url`` is set once it listens."""

    user: str = "svc"
    password: str = "svc-secret"
    accepted_tokens: set[str] = field(default_factory=set)
    # Bulk items with these ids are answered with a per-item mapper_parsing_exception.
    reject_ids: set[str] = field(default_factory=set)
    url: str = ""
    indices: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    # When set, requests block on it (bounded) before answering: lets a test provoke a client timeout.
    stall: threading.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def basic_auth(self) -> str:
        """The Authorization header value of the service credentials."""
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()

    def docs(self, index: str) -> dict[str, dict[str, Any]]:
        """The stored sources of ``index`` by ``_id``."""
        return self.indices.get(index, {}).get("docs", {})


def _error(kind: str, reason: str, status: int) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


def _check_index_name(name: str) -> None:
    if name != name.lower() or not name or name[0] in "-_+" or name in (".", ".."):
        raise Violation(f"invalid index name {name!r}")
    if _INVALID_INDEX_CHARS & set(name) or len(name.encode()) > 255:
        raise Violation(f"invalid index name {name!r}")


def fuzzy_edits(fuzziness: object, term: str) -> int:
    """The edits ``fuzziness`` allows for ``term``, as documented: ``AUTO`` is ``AUTO:3,6``, and
    ``AUTO:<low>,<high>`` means exact below ``low`` characters, one edit below ``high``, two from it."""
    spec = str(fuzziness)
    m = _FUZZINESS.fullmatch(spec)
    if m is None:
        raise Violation(f"fuzziness {fuzziness!r} is not 0, 1, 2, AUTO or AUTO:<low>,<high>")
    if not spec.startswith("AUTO"):
        return int(spec)
    low, high = (int(m.group(1)), int(m.group(2))) if m.group(1) else (3, 6)
    if low > high:
        raise Violation(f"fuzziness {spec}: low must not exceed high")
    return 0 if len(term) < low else 1 if len(term) < high else 2


def _edit_distance(a: str, b: str) -> int:
    # Damerau-Levenshtein (optimal string alignment), what fuzzy_transpositions=true measures.
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


# --- analysis ------------------------------------------------------------------------------------
#
# What an index's ``settings.analysis`` may define, as OpenSearch documents it (analyzers/custom-analyzer,
# tokenizers/pattern, token-filters/length, lowercase and snowball): the types the stand-in can run, each with
# its documented parameters. A definition of another type is reported as not emulated rather than guessed.

Analyzer = Callable[[str], list[str]]
TokenFilter = Callable[[list[str]], list[str]]

ANALYSIS_SECTIONS = {"analyzer", "tokenizer", "filter", "char_filter", "normalizer"}
CUSTOM_ANALYZER_KEYS = {"type", "tokenizer", "filter", "char_filter", "position_increment_gap"}
TOKENIZER_PARAMS = {"pattern": {"pattern", "flags", "group"}}
FILTER_PARAMS = {"length": {"min", "max"}, "lowercase": {"language"}, "snowball": {"language"}}
# The flags java.util.regex.Pattern knows, as the pattern tokenizer's ``flags`` names them (pipe-separated).
JAVA_REGEX_FLAGS = {
    "CANON_EQ", "CASE_INSENSITIVE", "COMMENTS", "DOTALL", "LITERAL", "MULTILINE", "UNICODE_CASE",
    "UNICODE_CHARACTER_CLASS", "UNIX_LINES",
}
LOWERCASE_LANGUAGES = {"greek", "irish", "turkish"}
SNOWBALL_LANGUAGES = {
    "Arabic", "Armenian", "Basque", "Catalan", "Danish", "Dutch", "English", "Estonian", "Finnish", "French",
    "German", "German2", "Hungarian", "Italian", "Irish", "Kp", "Lithuanian", "Lovins", "Norwegian", "Porter",
    "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Turkish",
}
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which the built-in ``english`` analyzer removes.
ENGLISH_STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
        "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
        "to", "was", "will", "with",
    }
)
# Lucene's LowerCaseFilter maps each code point with Character.toLowerCase, the one-to-one simple case
# mapping without context; Python's str.lower() is the full mapping (İ becomes two code points) with the
# final-sigma rule. Mapped one character at a time the two agree except where the full mapping is longer.
_SIMPLE_LOWER = {"\u0130": "i"}
# The standard tokenizer (UAX #29 word breaks), approximated: letters, digits and ``_`` joined by ``.``,
# ``'`` or ``’`` between them form one token, and every Han ideograph is a token of its own.
_STANDARD_WORD = regex.compile(r"[\p{IsAlphabetic}\p{N}_]+(?:[.'’][\p{IsAlphabetic}\p{N}_]+)*")
_HAN_OR_REST = regex.compile(r"\p{Han}|\P{Han}+")
_POSSESSIVE = regex.compile(r"['’][sS]$")


def _java_lowercase(token: str) -> str:
    return "".join(_SIMPLE_LOWER.get(c) or (c.lower() if len(c.lower()) == 1 else c) for c in token)


def _utf16_length(token: str) -> int:
    # Lucene measures a term in Java chars (UTF-16 code units), which is what ``length`` compares.
    return len(token.encode("utf-16-le")) // 2


def _standard_tokens(text: str) -> list[str]:
    return [piece for word in _STANDARD_WORD.findall(text) for piece in _HAN_OR_REST.findall(word)]


def _stemmer_filter(algorithm: str) -> TokenFilter:
    def stem(tokens: list[str]) -> list[str]:
        # A stemmer per call: PyStemmer objects are not thread-safe, and each request has its own thread.
        return Stemmer.Stemmer(algorithm).stemWords(tokens)

    return stem


def _lowercase(tokens: list[str]) -> list[str]:
    return [_java_lowercase(t) for t in tokens]


def _english(text: str) -> list[str]:
    # EnglishAnalyzer: standard tokenizer, possessive filter, lowercase, stop words, Porter stemmer.
    tokens = _lowercase([_POSSESSIVE.sub("", t) for t in _standard_tokens(text)])
    return _stemmer_filter("porter")([t for t in tokens if t not in ENGLISH_STOP_WORDS])


BUILT_IN_TOKENIZERS: dict[str, Callable[[str], list[str]]] = {
    "standard": _standard_tokens,
    "whitespace": str.split,
    "keyword": lambda text: [text] if text else [],
}
BUILT_IN_FILTERS: dict[str, TokenFilter] = {"lowercase": _lowercase}
# Analyzers a mapping may name without defining them (OpenSearch's built-in ones that the stand-in runs;
# ``standard`` and ``english`` approximately, through the standard tokenizer above).
BUILT_IN_ANALYZERS: dict[str, Analyzer] = {
    "standard": lambda text: _lowercase(_standard_tokens(text)),
    "simple": lambda text: _lowercase(regex.findall(r"\p{L}+", text)),
    "whitespace": str.split,
    "keyword": lambda text: [text] if text else [],
    "english": _english,
}


def _definitions(analysis: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    defs = analysis.get(section, {})
    if not isinstance(defs, dict):
        raise Violation(f"settings.analysis.{section} must be an object of named definitions")
    for name, spec in defs.items():
        if not isinstance(name, str) or not name:
            raise Violation(f"settings.analysis.{section} has an empty name")
        if not isinstance(spec, dict):
            raise Violation(f"settings.analysis.{section}.{name} must be an object")
    return defs


def _non_negative_int(value: object, label: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Violation(f"{label} must be a non-negative integer, got {value!r}")
    return value


def _check_params(spec: dict[str, Any], allowed: set[str], label: str) -> None:
    unknown = set(spec) - allowed - {"type"}
    if unknown:
        raise Violation(f"{label}: {sorted(unknown)} are not documented parameters of {spec.get('type')!r}")


def _tokenizer(name: str, spec: dict[str, Any]) -> Callable[[str], list[str]]:
    label = f"tokenizer {name!r}"
    kind = spec.get("type")
    if kind not in TOKENIZER_PARAMS:
        raise Violation(f"{label}: type {kind!r} is not emulated (only {sorted(TOKENIZER_PARAMS)})")
    _check_params(spec, TOKENIZER_PARAMS[kind], label)
    pattern = spec.get("pattern", r"\W+")
    if not isinstance(pattern, str) or not pattern:
        raise Violation(f"{label}: pattern must be a non-empty Java regular expression")
    flags = spec.get("flags", "")
    if not isinstance(flags, str) or (flags and set(flags.split("|")) - JAVA_REGEX_FLAGS):
        raise Violation(f"{label}: flags must be pipe-separated java.util.regex.Pattern flags, got {flags!r}")
    if flags:
        raise Violation(f"{label}: the stand-in does not emulate pattern flags ({flags})")
    group = spec.get("group", -1)
    if not isinstance(group, int) or isinstance(group, bool) or group < -1:
        raise Violation(f"{label}: group must be an integer, -1 (split) or a capture group")
    try:
        # The `regex` module reads the Java constructs used here alike (\p{IsAlphabetic}, \p{N}, classes).
        compiled = regex.compile(pattern)
    except regex.error as exc:
        raise Violation(f"{label}: pattern {pattern!r} does not compile: {exc}") from exc
    if group > compiled.groups:
        raise Violation(f"{label}: group {group} does not exist in {pattern!r}")
    if group == -1:
        return lambda text: [t for t in compiled.split(text) if t]
    return lambda text: [t for t in (m.group(group) for m in compiled.finditer(text)) if t]


def _token_filter(name: str, spec: dict[str, Any]) -> TokenFilter:
    label = f"filter {name!r}"
    kind = spec.get("type")
    if kind not in FILTER_PARAMS:
        raise Violation(f"{label}: type {kind!r} is not emulated (only {sorted(FILTER_PARAMS)})")
    _check_params(spec, FILTER_PARAMS[kind], label)
    if kind == "length":
        low = _non_negative_int(spec.get("min", 0), f"{label}: min")
        high = _non_negative_int(spec.get("max", 2**31 - 1), f"{label}: max")
        if low > high:
            raise Violation(f"{label}: min {low} exceeds max {high}")
        return lambda tokens: [t for t in tokens if low <= _utf16_length(t) <= high]
    if kind == "lowercase":
        if "language" in spec:
            if spec["language"] not in LOWERCASE_LANGUAGES:
                raise Violation(f"{label}: language must be one of {sorted(LOWERCASE_LANGUAGES)}")
            raise Violation(f"{label}: the stand-in does not emulate the {spec['language']} lowercase filter")
        return _lowercase
    language = spec.get("language", "English")
    if language not in SNOWBALL_LANGUAGES:
        raise Violation(f"{label}: language {language!r} is not a documented snowball language")
    if language.lower() not in Stemmer.algorithms():
        raise Violation(f"{label}: the stand-in has no {language} stemmer")
    # PyStemmer runs libstemmer: the Snowball project's C build of the algorithms Lucene has in Java.
    return _stemmer_filter(language.lower())


class Analysis:
    """The analyzers of one index: its ``settings.analysis`` checked as documented, and the built-in ones.

    Definitions are checked (and compiled) when the index is created, so a shape a cluster would refuse
    is a violation of the create request, not of a later search.
    """

    def __init__(self, analysis: object = None) -> None:
        """Check ``analysis`` (the ``settings.analysis`` object, or None) and build its analyzers."""
        if analysis is None:
            analysis = {}
        if not isinstance(analysis, dict) or set(analysis) - ANALYSIS_SECTIONS:
            raise Violation(f"settings.analysis holds only {sorted(ANALYSIS_SECTIONS)}")
        for section in ("char_filter", "normalizer"):
            if _definitions(analysis, section):
                raise Violation(f"the stand-in does not emulate settings.analysis.{section}")
        tokenizers = {n: _tokenizer(n, s) for n, s in _definitions(analysis, "tokenizer").items()}
        filters = {n: _token_filter(n, s) for n, s in _definitions(analysis, "filter").items()}
        self._analyzers: dict[str, Analyzer] = dict(BUILT_IN_ANALYZERS)
        for name, spec in _definitions(analysis, "analyzer").items():
            self._analyzers[name] = self._custom(name, spec, tokenizers, filters)

    @staticmethod
    def _custom(
        name: str,
        spec: dict[str, Any],
        tokenizers: dict[str, Callable[[str], list[str]]],
        filters: dict[str, TokenFilter],
    ) -> Analyzer:
        label = f"analyzer {name!r}"
        if name.startswith("_"):
            raise Violation(f"{label}: analyzer names must not start with '_'")
        if spec.get("type", "custom") != "custom":
            raise Violation(f"{label}: only custom analyzers are emulated, not type {spec['type']!r}")
        if set(spec) - CUSTOM_ANALYZER_KEYS:
            raise Violation(f"{label}: {sorted(set(spec) - CUSTOM_ANALYZER_KEYS)} are not analyzer keys")
        if "position_increment_gap" in spec:
            _non_negative_int(spec["position_increment_gap"], f"{label}: position_increment_gap")
        if spec.get("char_filter"):
            raise Violation(f"{label}: the stand-in does not emulate character filters")
        tokenizer_name = spec.get("tokenizer")
        if not isinstance(tokenizer_name, str):
            raise Violation(f"{label}: tokenizer (required) must name a tokenizer")
        tokenizer = tokenizers.get(tokenizer_name) or BUILT_IN_TOKENIZERS.get(tokenizer_name)
        if tokenizer is None:
            raise Violation(f"{label}: tokenizer {tokenizer_name!r} is neither defined nor built in")
        names = spec.get("filter", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise Violation(f"{label}: filter must be a list of token filter names")
        chain: list[TokenFilter] = []
        for filter_name in names:
            token_filter = filters.get(filter_name) or BUILT_IN_FILTERS.get(filter_name)
            if token_filter is None:
                raise Violation(f"{label}: token filter {filter_name!r} is neither defined nor built in")
            chain.append(token_filter)

        def analyze(text: str) -> list[str]:
            tokens = tokenizer(text)
            for step in chain:
                tokens = step(tokens)
            return tokens

        return analyze

    def get(self, name: object) -> Analyzer:
        """The analyzer called ``name``; a violation if it is neither defined nor built in."""
        if not isinstance(name, str) or name not in self._analyzers:
            raise Violation(f"analyzer {name!r} is neither defined in settings.analysis nor built in")
        return self._analyzers[name]


def analyzer_for(index_body: dict[str, Any], name: str) -> Analyzer:
    """The analyzer ``name`` as the stand-in runs it for an index created with ``index_body``."""
    return Analysis(index_body.get("settings", {}).get("analysis")).get(name)


def _check_mapping_analyzers(props: dict[str, Any], analysis: Analysis) -> None:
    for fname, fspec in props.items():
        for label, sub in [(fname, fspec)] + [(f"{fname}.{k}", v) for k, v in fspec.get("fields", {}).items()]:
            named = [k for k in ("analyzer", "search_analyzer", "search_quote_analyzer") if k in sub]
            if named and sub.get("type") != "text":
                raise Violation(f"{label}: only text fields take an analyzer")
            if "search_analyzer" in sub and "analyzer" not in sub:
                raise Violation(f"{label}: analyzer must be set when search_analyzer is set")
            for key in named:
                analysis.get(sub[key])


@dataclass
class _Schema:
    """One index's mapping and analysis: what a query on it is checked and evaluated against."""

    mapping: dict[str, Any]
    analysis: Analysis

    def text_field(self, name: str) -> tuple[str, dict[str, Any]]:
        """The source field behind a searchable text (sub)field ``name`` and its mapping."""
        top, _, sub = name.partition(".")
        spec = self.mapping.get("properties", {}).get(top, {})
        if sub:
            spec = spec.get("fields", {}).get(sub, {})
        if spec.get("type") != "text":
            raise Violation(f"{name!r} is not a mapped text field (a real cluster would silently match nothing)")
        return top, spec

    def index_terms(self, name: str, source: dict[str, Any]) -> list[str]:
        """The terms indexed for (sub)field ``name`` of ``source``: its ``analyzer`` (default standard)."""
        top, spec = self.text_field(name)
        return self.analysis.get(spec.get("analyzer", "standard"))(source.get(top) or "")

    def query_terms(self, name: str, text: str, override: object = None) -> list[str]:
        """The terms of query ``text`` on ``name``: the query's analyzer, else the field's search analyzer."""
        _, spec = self.text_field(name)
        default = spec.get("search_analyzer", spec.get("analyzer", "standard"))
        chosen = override if override is not None else default
        return self.analysis.get(chosen)(text)


def _lucene_regexp_to_python(value: str) -> re.Pattern[str]:
    # The engine emits only `.`, `.*`, `[...]` and backslash-escapes: Python's syntax for those is the same.
    return re.compile(value)


def _match(source: dict[str, Any], query: dict[str, Any]) -> bool:
    """Evaluate the filter subset the engine uses (term, terms, range, regexp, bool)."""
    ((kind, spec),) = query.items()
    if kind == "bool":
        clauses = spec.get("filter", []) + spec.get("must", [])
        return all(_match(source, c) for c in clauses)
    if kind == "term":
        ((name, value),) = spec.items()
        got = source.get(name)
        return value in got if isinstance(got, list) else got == value
    if kind == "terms":
        ((name, values),) = spec.items()
        got = source.get(name)
        got_list = got if isinstance(got, list) else [got]
        return any(v in values for v in got_list)
    if kind == "range":
        ((name, bounds),) = spec.items()
        got = source.get(name)
        if got is None:
            return False
        return datetime.fromisoformat(got) >= datetime.fromisoformat(bounds["gte"])
    if kind == "regexp":
        ((name, body),) = spec.items()
        if body.get("flags") != "NONE":
            raise Violation("regexp queries must set flags NONE (no optional Lucene operators)")
        return _lucene_regexp_to_python(body["value"]).fullmatch(source.get(name, "")) is not None
    if kind == "match_all":
        return True
    raise Violation(f"unexpected query clause {kind!r}")


def _score_bool(bool_q: dict[str, Any], source: dict[str, Any], schema: _Schema) -> float | None:
    """The score of a document that passed the filters, or None when the bool query does not match it.

    As documented: every ``must`` clause must match; of the ``should`` clauses at least
    ``minimum_should_match`` must, and that defaults to 0 when ``must`` or ``filter`` is present.
    """
    must = [_score_clause(c, source, schema) for c in bool_q.get("must", [])]
    should = [_score_clause(c, source, schema) for c in bool_q.get("should", [])]
    if any(s is None for s in must):
        return None
    default_msm = 0 if bool_q.get("must") or bool_q.get("filter") else 1
    msm = bool_q.get("minimum_should_match", default_msm)
    if not isinstance(msm, int) or isinstance(msm, bool):
        raise Violation("the engine sends minimum_should_match as an integer")
    if sum(1 for s in should if s is not None) < msm:
        return None
    return float(sum(s for s in must + should if s is not None))


def _score_clause(clause: dict[str, Any], source: dict[str, Any], schema: _Schema) -> float | None:
    if len(clause) != 1:
        raise Violation(f"a query clause has exactly one key, got {list(clause)}")
    ((kind, spec),) = clause.items()
    if kind == "multi_match":
        return _score_multi_match(spec, source, schema)
    if kind == "constant_score":
        if set(spec) - {"filter", "boost", "_name"} or "filter" not in spec:
            raise Violation("constant_score takes filter (required), boost and _name")
        boost = spec.get("boost", 1.0)
        if not isinstance(boost, int | float) or isinstance(boost, bool) or boost < 0:
            raise Violation("constant_score.boost must be a non-negative number")
        return float(boost) if _matches_query(spec["filter"], source, schema) else None
    raise Violation(f"unexpected scoring clause {kind!r}")


def _score_multi_match(spec: dict[str, Any], source: dict[str, Any], schema: _Schema) -> float | None:
    if not isinstance(spec.get("query"), str) or not spec["query"].strip():
        raise Violation("multi_match needs a query string")
    if spec.get("type", "best_fields") not in MULTI_MATCH_TYPES:
        raise Violation(f"unknown multi_match type {spec.get('type')!r}")
    fields = spec.get("fields")
    if not isinstance(fields, list) or not fields:
        raise Violation("multi_match needs a list of fields")
    total = 0.0
    for entry in fields:
        m = _FIELD_BOOST.fullmatch(entry) if isinstance(entry, str) else None
        if m is None:
            raise Violation(f"multi_match field {entry!r} is not <field> or <field>^<boost>")
        # Each field analyses the query with its own search analyzer, as most_fields does.
        terms = set(schema.query_terms(m.group(1), spec["query"], spec.get("analyzer")))
        total += float(m.group(2) or 1.0) * len(terms & set(schema.index_terms(m.group(1), source)))
    return total or None


def _matches_query(query: dict[str, Any], source: dict[str, Any], schema: _Schema) -> bool:
    """Filter-context evaluation of a ``match`` (with or without fuzziness) inside ``constant_score``."""
    if list(query) != ["match"] or len(query["match"]) != 1:
        raise Violation("the engine wraps exactly one single-field match in constant_score")
    ((fname, spec),) = query["match"].items()
    if not isinstance(spec, dict) or set(spec) - MATCH_KEYS:
        raise Violation(f"match parameters must be among the documented ones, got {spec!r}")
    if not isinstance(spec.get("query"), str) or not spec["query"].strip():
        raise Violation("match needs a query string")
    if "fuzzy_rewrite" in spec and not _FUZZY_REWRITE.fullmatch(str(spec["fuzzy_rewrite"])):
        raise Violation(f"fuzzy_rewrite {spec['fuzzy_rewrite']!r} is not a documented rewrite method")
    prefix = spec.get("prefix_length", 0)
    if not isinstance(prefix, int) or isinstance(prefix, bool) or prefix < 0:
        raise Violation("prefix_length must be a non-negative integer")
    if not isinstance(spec.get("fuzzy_transpositions", True), bool):
        raise Violation("fuzzy_transpositions must be a boolean")
    doc_tokens = set(schema.index_terms(fname, source))
    for term in schema.query_terms(fname, spec["query"], spec.get("analyzer")):
        edits = fuzzy_edits(spec.get("fuzziness", 0), term)
        for token in doc_tokens:
            if token[:prefix] == term[:prefix] and _edit_distance(term, token) <= edits:
                return True
    return False


class _Handler(BaseHTTPRequestHandler):
    standin: OpenSearchStandIn  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _respond(self, status: int, payload: dict[str, Any] | None) -> None:
        data = json.dumps(payload).encode() if payload is not None else b""
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json; charset=UTF-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client timed out and hung up (the timeout test does that on purpose)

    def _handle(self) -> None:
        st = self.standin
        parts = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        auth = self.headers.get("authorization")
        with st._lock:
            st.requests.append(Recorded(self.command, unquote(parts.path), params, auth, body))
        if st.stall is not None:
            st.stall.wait(timeout=10)
        try:
            status, payload = self._route(self.command, unquote(parts.path), params, auth, body)
        except Violation as exc:
            with st._lock:
                st.violations.append(f"{self.command} {parts.path}: {exc}")
            status, payload = _error("standin_violation", str(exc), 400)
        self._respond(status, payload)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _handle

    # --- routing ----------------------------------------------------------------------------

    def _authorize(self, auth: str | None, search: bool) -> tuple[int, dict[str, Any]] | None:
        st = self.standin
        if auth == st.basic_auth:
            return None
        if search and auth and auth.startswith("Bearer ") and auth[7:] in st.accepted_tokens:
            return None
        return _error("security_exception", "missing or unknown authentication", 401)

    def _resolve(self, expr: str, params: dict[str, str]) -> list[str]:
        st = self.standin
        names: list[str] = []
        for part in expr.split(","):
            if "*" in part:
                rx = re.compile(re.escape(part).replace(r"\*", ".*"))
                names.extend(n for n in st.indices if rx.fullmatch(n))
                continue
            _check_index_name(part)
            if part in st.indices:
                names.append(part)
            elif params.get("ignore_unavailable") != "true":
                raise LookupError(part)
        return names

    def _route(
        self, method: str, path: str, params: dict[str, str], auth: str | None, body: bytes
    ) -> tuple[int, dict[str, Any] | None]:
        st = self.standin
        segments = [s for s in path.split("/") if s]
        endpoint = segments[-1] if segments and segments[-1].startswith("_") else None
        is_search = endpoint == "_search"
        denied = self._authorize(auth, search=is_search)
        if denied:
            return denied
        if path == "/_cluster/health":
            return 200, {
                "cluster_name": "standin",
                "status": "green",
                "timed_out": False,
                "number_of_nodes": 1,
            }
        if path == "/_bulk" and method in ("POST", "PUT"):
            return self._bulk(body)
        if len(segments) == 1 and endpoint is None:
            name = segments[0]
            _check_index_name(name)
            if method == "HEAD":
                return (200 if name in st.indices else 404), None
            if method == "PUT":
                return self._create(name, body)
            raise Violation(f"unexpected {method} on an index")
        if len(segments) == 2 and endpoint in ("_refresh", "_search", "_delete_by_query", "_count"):
            try:
                names = self._resolve(segments[0], params)
            except LookupError as exc:
                return _error("index_not_found_exception", f"no such index [{exc}]", 404)
            if endpoint == "_refresh":
                if method != "POST":
                    raise Violation("_refresh must be POST")
                return 200, {"_shards": {"total": len(names), "successful": len(names), "failed": 0}}
            payload = json.loads(body) if body else {}
            if endpoint == "_search":
                return self._search(names, payload)
            if endpoint == "_delete_by_query":
                return self._delete_by_query(names, params, payload)
            return self._count(names, payload)
        raise Violation(f"unexpected request {method} {path}")

    def _create(self, name: str, body: bytes) -> tuple[int, dict[str, Any]]:
        st = self.standin
        if name in st.indices:
            return _error("resource_already_exists_exception", f"index [{name}] already exists", 400)
        spec = json.loads(body)
        if set(spec) - {"settings", "mappings", "aliases"}:
            raise Violation(f"unknown index-creation keys {set(spec) - {'settings', 'mappings', 'aliases'}}")
        mappings = spec.get("mappings", {})
        if mappings.get("dynamic") != "strict":
            raise Violation("the mapping must be strict (dynamic: strict)")
        if "_meta" in mappings and not isinstance(mappings["_meta"], dict):
            raise Violation("mappings._meta must be an object")
        props = mappings.get("properties", {})
        for fname, ftype in REQUIRED_MAPPING_TYPES.items():
            if props.get(fname, {}).get("type") != ftype:
                raise Violation(f"mapping of {fname!r} must be {ftype}")
        settings = spec.get("settings", {})
        if not isinstance(settings, dict):
            raise Violation("settings must be an object")
        analysis = Analysis(settings.get("analysis"))
        _check_mapping_analyzers(props, analysis)
        st.indices[name] = {"mapping": mappings, "analysis": analysis, "docs": {}}
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def _bulk(self, body: bytes) -> tuple[int, dict[str, Any]]:
        st = self.standin
        lines = body.decode().split("\n")
        if lines[-1] != "":
            raise Violation("_bulk body must end with a newline")
        lines = lines[:-1]
        if len(lines) % 2:
            raise Violation("every _bulk action line must be followed by a source line")
        items = []
        for action_line, source_line in zip(lines[::2], lines[1::2], strict=True):
            action = json.loads(action_line)
            if list(action) != ["index"]:
                raise Violation(f"expected an index action, got {list(action)}")
            meta = action["index"]
            name, doc_id = meta.get("_index"), meta.get("_id")
            if not name or not doc_id:
                raise Violation("index action needs _index and _id")
            if name not in st.indices:
                raise Violation(f"bulk into {name!r} before the index was created with its mapping")
            source = json.loads(source_line)
            for fname, ftype in REQUIRED_SOURCE_FIELDS.items():
                if fname not in source or not isinstance(source[fname], ftype):
                    raise Violation(f"source line lacks a valid {fname!r}")
            unmapped = set(source) - set(st.indices[name]["mapping"].get("properties", {}))
            if unmapped:
                raise Violation(f"fields {unmapped} are not in the strict mapping of {name!r}")
            if set(source) - set(REQUIRED_SOURCE_FIELDS):
                raise Violation(f"unexpected fields {set(source) - set(REQUIRED_SOURCE_FIELDS)}")
            if source["chunk_id"] != doc_id:
                raise Violation("_id must be the chunk_id")
            if doc_id in st.reject_ids:
                items.append(
                    {
                        "index": {
                            "_index": name,
                            "_id": doc_id,
                            "status": 400,
                            "error": {
                                "type": "mapper_parsing_exception",
                                "reason": "failed to parse field [content]",
                            },
                        }
                    }
                )
                continue
            existed = doc_id in st.indices[name]["docs"]
            st.indices[name]["docs"][doc_id] = source
            items.append(
                {
                    "index": {
                        "_index": name,
                        "_id": doc_id,
                        "_version": 1,
                        "result": "updated" if existed else "created",
                        "_shards": {"total": 1, "successful": 1, "failed": 0},
                        "status": 200 if existed else 201,
                    }
                }
            )
        errors = any(item["index"]["status"] >= 300 for item in items)
        return 200, {"took": 1, "errors": errors, "items": items}

    def _search(self, names: list[str], payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        query = payload.get("query", {})
        if list(query) != ["bool"]:
            raise Violation("search must be a bool query")
        bool_q = query["bool"]
        if set(bool_q) - BOOL_KEYS:
            raise Violation(f"unknown bool keys {set(bool_q) - BOOL_KEYS}")
        filters = bool_q.get("filter", [])
        if not any("terms" in f and "project" in f["terms"] for f in filters):
            raise Violation("bool.filter must restrict project")
        scoring = bool_q.get("must", []) + bool_q.get("should", [])
        if sum(1 for c in scoring if "multi_match" in c) != 1:
            raise Violation("the bool query must hold exactly one multi_match (in must or should)")
        hits = []
        for name in names:
            index = self.standin.indices[name]
            schema = _Schema(index["mapping"], index.get("analysis") or Analysis())
            for doc_id, source in self.standin.docs(name).items():
                if not all(_match(source, f) for f in filters):
                    continue
                score = _score_bool(bool_q, source, schema)
                if score is not None:
                    hits.append(
                        {
                            "_index": name,
                            "_id": doc_id,
                            "_score": score,
                            "_source": {k: source[k] for k in payload.get("_source", source)},
                        }
                    )
        hits.sort(key=lambda h: -h["_score"])
        hits = hits[: payload.get("size", 10)]
        return 200, {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
            "hits": {"max_score": hits[0]["_score"] if hits else None, "hits": hits},
        }

    def _delete_by_query(
        self, names: list[str], params: dict[str, str], payload: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        if params.get("refresh") != "true":
            raise Violation("_delete_by_query must refresh")
        query = payload.get("query")
        if not query:
            raise Violation("_delete_by_query needs a query")
        deleted = 0
        for name in names:
            docs = self.standin.docs(name)
            for doc_id in [i for i, s in docs.items() if _match(s, query)]:
                del docs[doc_id]
                deleted += 1
        return 200, {
            "took": 1,
            "timed_out": False,
            "total": deleted,
            "deleted": deleted,
            "batches": 1,
            "version_conflicts": 0,
            "noops": 0,
            "failures": [],
        }

    def _count(self, names: list[str], payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        query = payload.get("query", {"match_all": {}})
        n = sum(1 for name in names for s in self.standin.docs(name).values() if _match(s, query))
        return 200, {
            "count": n,
            "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
        }


def serve(standin: OpenSearchStandIn) -> ThreadingHTTPServer:
    """Start the stand-in on a free local port (daemon thread); call ``shutdown()`` when done."""
    handler = type("BoundHandler", (_Handler,), {"standin": standin})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    standin.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="opensearch-standin", daemon=True
    ).start()
    return server
