"""Query normalisation: clean text, word tokens, and the entities an operator's query tends to carry.

Entities found: ports (``:5432``, ``port 6379``), error codes (``ERESOLVE``, ``E0308``, ``ORA-00942``,
HTTP 4xx/5xx, ``exit code 137``), identifiers (``KubePodCrashLooping``, ``max_connections``,
``kube-apiserver``), versions (``v1.29.3``, ``14.2``), ``#tags`` and ``@mentions``.

Identifiers are also split on case and punctuation boundaries (``KubePodCrashLooping`` -> ``Kube Pod
Crash Looping``), so the lexical engine can match an alert name written whole as well as its words.
Everything is regular-expression work on at most :data:`MAX_QUERY_CHARS` characters, so a pasted log
line costs microseconds and never blows up.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MAX_QUERY_CHARS = 10_000

_WORD = re.compile(r"\w+", re.UNICODE)
_TAG = re.compile(r"(?<![\w#])#([A-Za-z0-9][\w/-]*)")
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9][\w.-]*[\w])")
# ``host:5432``, ``:8080``, ``port 6379``; not ``12:30`` (a time).
_PORT = re.compile(r"(?:(?:^|(?<=[A-Za-z_\]\s])):|\bport\s+)(\d{2,5})\b", re.IGNORECASE)
_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.-]+)?(?![\w.])")
_ERROR_CODES = (
    re.compile(r"\bE[A-Z]{3,}\b"),  # POSIX/npm: ENOENT, ERESOLVE, ECONNREFUSED
    re.compile(r"\b[A-Z]{1,5}-?\d{3,5}\b"),  # E0308, ORA-00942, TS2345, CVE-less codes
    re.compile(r"\b(?:exit(?:ed)?(?: with)?(?: code| status)?|status|code)\s+(\d{1,3})\b", re.IGNORECASE),
    re.compile(r"\b(?:HTTP\s*)?([45]\d\d)\b(?=\s+[A-Z][a-z]|\s*$|\s+error)", re.IGNORECASE),
)
# CamelCase with at least two humps (acronyms included: KubeAPIDown, CoreDNSErrorsHigh), snake_case,
# dotted or dashed names with a letter on both sides.
_IDENTIFIER = re.compile(
    r"\b(?:[A-Za-z][a-z0-9]*(?:[A-Z]+[a-z0-9]*)*[A-Z][a-z0-9]+[A-Za-z0-9]*|[A-Z]{2,}[a-z]+[A-Za-z0-9]*|"
    r"[a-z][a-z0-9]*[A-Z]+[A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z]{2,}[A-Za-z0-9]*|"
    r"[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)+)\b"
)
# Two or more humps: KubePodCrashLooping, etcdServerDown, CoreDNSErrorsHigh (not "Redis", not "OOM").
_CAMEL = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z]+[a-z0-9]*)+\b")
_CASE_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_.\-/]+")


@dataclass(frozen=True)
class Entities:
    """What was recognised in a query (each list in order of appearance, without duplicates)."""

    ports: tuple[str, ...] = ()
    error_codes: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, list[str]]:
        """JSON shape (only the kinds that were found)."""
        return {k: list(v) for k, v in self.__dict__.items() if v}


@dataclass(frozen=True)
class NormalisedQuery:
    """A query ready for routing and retrieval."""

    raw: str
    text: str  # NFKC, control characters removed, whitespace collapsed
    tokens: tuple[str, ...]  # word tokens of ``text`` (``\\w+``), case kept
    entities: Entities = field(default_factory=Entities)

    @property
    def lexical_text(self) -> str:
        """What the lexical engine searches: the text without ``#``/``@`` sigils, plus split identifiers."""
        base = _TAG.sub(r"\1", self.text)
        base = _MENTION.sub(r"\1", base)
        extra = [split_identifier(i) for i in self.entities.identifiers]
        extra = [e for e in extra if e and e.lower() not in base.lower()]
        return " ".join([base, *extra]) if extra else base

    @property
    def fuzzy_words(self) -> tuple[str, ...]:
        """Words worth matching with a typo: identifiers and error codes (not plain words, whose
        near neighbours are mostly other words)."""
        return tuple(dict.fromkeys([*self.entities.identifiers, *self.entities.error_codes]))

    @property
    def semantic_text(self) -> str:
        """What the embedder sees: the cleaned text (sigils kept; the model reads them as words)."""
        return self.text


def clean_text(raw: str) -> str:
    """NFKC-normalise, turn control characters into spaces and collapse whitespace."""
    text = unicodedata.normalize("NFKC", raw)
    text = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    return " ".join(text.split())


def split_identifier(identifier: str) -> str:
    """``KubePodCrashLooping`` -> ``Kube Pod Crash Looping``; ``max_connections`` -> ``max connections``."""
    spaced = _SEPARATORS.sub(" ", identifier)
    spaced = _CASE_BOUNDARY.sub(" ", spaced)
    return " ".join(spaced.split())


def camel_case_parts(text: str, limit: int = 2000) -> str:
    """The words of every CamelCase identifier in ``text`` (``KubePodCrashLooping`` -> ``Kube Pod Crash
    Looping``), space-separated; at most ``limit`` identifiers. ``snake_case`` and ``kebab-case`` need
    no help: the lexical engines' tokenizers already split on punctuation.
    """
    parts: list[str] = []
    for match in _CAMEL.finditer(text):
        if len(parts) >= limit:
            break
        word = match.group(0)
        if any(c.islower() for c in word) and any(c.isupper() for c in word[1:]):
            parts.append(split_identifier(word))
    return " ".join(parts)


def _unique(items: list[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        if item:
            seen.setdefault(item, None)
    return tuple(seen)


def extract_entities(text: str) -> Entities:
    """Find ports, error codes, identifiers, versions, tags and mentions in ``text``."""
    codes: list[str] = []
    for pattern in _ERROR_CODES:
        for m in pattern.finditer(text):
            codes.append(m.group(m.lastindex or 0))
    versions = [m.group(0) for m in _VERSION.finditer(text)]
    identifiers = [
        m.group(0)
        for m in _IDENTIFIER.finditer(text)
        if m.group(0) not in codes and not _VERSION.fullmatch(m.group(0))
    ]
    return Entities(
        ports=_unique([m.group(1) for m in _PORT.finditer(text)]),
        error_codes=_unique(codes),
        identifiers=_unique(identifiers),
        versions=_unique(versions),
        tags=_unique([m.group(1) for m in _TAG.finditer(text)]),
        mentions=_unique([m.group(1) for m in _MENTION.finditer(text)]),
    )


def normalise_query(raw: str) -> NormalisedQuery:
    """Normalise ``raw`` (callers check it is non-empty and within :data:`MAX_QUERY_CHARS` first)."""
    text = clean_text(raw[:MAX_QUERY_CHARS])
    return NormalisedQuery(
        raw=raw,
        text=text,
        tokens=tuple(_WORD.findall(text)),
        entities=extract_entities(text),
    )
