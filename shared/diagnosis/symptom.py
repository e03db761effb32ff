"""Symptom projection: a failure described in words, reduced to a stable set of keywords and a hash.

A signature line from a log ("npm ERR! ERESOLVE unable to resolve dependency tree") and a person's
description ("npm can't resolve the dependency tree") should land on the same ``sym_sha`` when they
say the same thing. The projection:

1. removes run noise (:func:`shared.noise.normalise_text`) and splits CamelCase
   (``ModuleNotFoundError`` -> module not found error);
2. lower-cases and expands abbreviations, generic and per tool (ERESOLVE -> resolve error,
   OOM -> out of memory, ENOENT -> not found, ...);
3. drops English stop words, words every failure shares ("error", "failed", "unable") and the
   tool's own name (the tool is part of the identity already);
4. stems with the Snowball English stemmer (PyStemmer), de-duplicates and sorts the keywords;
5. hashes ``tool + "\\n" + " ".join(keywords)``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from functools import lru_cache

import Stemmer

from shared.diagnosis.abbreviations import ABBREVIATIONS, TOOL_ABBREVIATIONS, TOOL_WORDS
from shared.diagnosis.classify import resolve_tool
from shared.noise import normalise_text

MAX_SYMPTOM_CHARS = 4000

# English stop words (the usual short list) plus words every failure message shares, so they tell
# no two failures apart: "error", "failed", "cannot", ... Negations go too: "not found" and "found"
# project the same, which costs little and makes "no module" match "module not found".
_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can cannot can't could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he her here hers herself him himself his how
    i if in into is isn't it it's its itself just let's me more most mustn't my myself no nor not of off on once
    only or other ought our ours ourselves out over own same shan't she should shouldn't so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was
    wasn't we were weren't what when where which while who whom why will with won't would wouldn't you your
    yours yourself yourselves cant couldnt dont doesnt didnt isnt wasnt wont wouldnt shouldnt hasnt havent
    error errors err fail fails failed failing failure failures fatal unable problem problems issue issues
    occurred occur happened happens get got getting keep keeps kept tried try trying when whenever now still
    because due please see run running ran
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9']*|\d+")
_PLACEHOLDER_RE = re.compile(r"<[a-z]+>")


@dataclass(frozen=True)
class Symptom:
    """A projected symptom: ``keywords`` are sorted stems, ``sym_sha`` hashes them with the tool."""

    tool: str
    normalised: str
    keywords: tuple[str, ...]
    sym_sha: str

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        data = asdict(self)
        data["keywords"] = list(self.keywords)
        return data


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _words(text: str) -> list[str]:
    """Words of ``text``: noise and placeholders removed, CamelCase split, apostrophes dropped."""
    cleaned = _PLACEHOLDER_RE.sub(" ", normalise_text(text))
    words: list[str] = []
    for token in _WORD_RE.findall(cleaned):
        # Split CamelCase only when it mixes cases; ALLCAPS codes (ERESOLVE, OOM) stay whole.
        parts = _CAMEL_RE.sub(" ", token).split() if not token.isupper() else [token]
        words.extend(p.lower() for p in parts)
    return words


def _expand(words: list[str], tool: str, depth: int = 2) -> list[str]:
    """Abbreviations replaced by their words; expansions are expanded again (``enoent`` -> not found
    -> not find), ``depth`` times at most so that no table can loop."""
    table = TOOL_ABBREVIATIONS.get(tool, {})
    expanded: list[str] = []
    for word in words:
        replacement = table.get(word) or ABBREVIATIONS.get(word)
        if replacement is None and word.endswith("'s"):
            replacement = word[:-2]
        if replacement is None:
            expanded.append(word.replace("'", ""))
            continue
        parts = replacement.replace("'", "").split()
        expanded.extend(_expand(parts, tool, depth - 1) if depth > 1 and parts != [word] else parts)
    return expanded


def project_symptom(tool: str, text: str) -> Symptom:
    """Project a failure description or signature line onto sorted keywords and ``sym_sha``.

    ``tool``: a known tool or alias ("auto" counts as "generic"); raises :class:`UnknownToolError`.
    """
    name = resolve_tool(tool)
    if name == "auto":
        name = "generic"
    own_words = TOOL_WORDS.get(name, frozenset()) | {name}
    words = _expand(_words(text[:MAX_SYMPTOM_CHARS]), name)
    kept = [w for w in words if w not in STOP_WORDS and w not in own_words and len(w) > 1]
    stems = _stemmer().stemWords(kept)
    ordered = list(dict.fromkeys(stems))  # de-duplicated, first-seen order
    keywords = tuple(sorted(ordered))
    digest = hashlib.sha256(f"{name}\n{' '.join(keywords)}".encode()).hexdigest()
    return Symptom(tool=name, normalised=" ".join(ordered), keywords=keywords, sym_sha=digest)
