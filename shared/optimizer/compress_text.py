"""Prose compressor: drop filler phrases and function words where the meaning survives.

The word list is hand-picked instead of taken from a general stop-word list (NLTK, scikit-learn, spaCy):
those lists drop negations, modals, quantities and prepositions ("not", "no", "never", "must", "all",
"few", "from", "before", "without") that change what an operational instruction says. Only articles,
forms of "to be", pronouns, hedges and intensifiers go. Identifiers, numbers, error codes and anything
with a digit, an underscore, a dot, a slash or capitals in the middle never match a lowercase word, and
code (fenced blocks, indented blocks, inline `code`, tables, HTML comments) is left exactly as it is.
"""

from __future__ import annotations

import re

from shared.optimizer.outcome import CannotCompress

DROP_WORDS = frozenset(
    {
        "a", "an", "the",
        "is", "are", "was", "were", "be", "been", "being", "am",
        "has", "have", "had", "do", "does", "did",
        "that",
        "it", "its", "it's", "this", "these", "those", "there",
        "you", "your", "yours", "you'll", "you're", "we", "our", "ours", "us",
        "can", "will", "would",
        "just", "really", "very", "quite", "simply", "basically", "actually", "literally", "certainly",
        "definitely", "essentially",
        "please", "kindly", "furthermore", "moreover", "additionally",
    }
)
# Phrases replaced before single words are dropped.
_PHRASE_TABLE: tuple[tuple[str, str], ...] = (
    (r"it is important to (?:note|remember) that", ""),
    (r"(?:please )?(?:note|keep in mind) that", ""),
    (r"due to the fact that", "because"),
    (r"in the event that", "if"),
    (r"at this point in time", "now"),
    (r"for the purpose of", "for"),
    (r"in order to", "to"),
    (r"as well as", "and"),
    (r"a (?:large |small )?number of", "several"),
    (r"is able to", "can"),
    (r"make sure (?:that )?", "ensure "),
    (r"in addition(?: to)?,?", "and"),
)
_PHRASES = re.compile(
    "|".join(f"(?P<p{i}>\\b{pattern}\\b)" for i, (pattern, _) in enumerate(_PHRASE_TABLE)), re.IGNORECASE
)
# One alternation of the drop words, lowercase and sentence-case, never touching a word that is quoted,
# bracketed, part of a path or identifier (neighbouring word characters, quotes, slashes, dots, dashes).
_DROP = re.compile(
    r"(?<![\w'\"(\[`/.\-])(?:"
    + "|".join(
        sorted({re.escape(w) for w in DROP_WORDS} | {re.escape(w.capitalize()) for w in DROP_WORDS if len(w) > 1},
               key=len, reverse=True)
    )
    + r")(?![\w'\"`)\]/\-]|\.\w)"
)
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HTML_COMMENT = re.compile(r"<!--.*?-->")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HORIZONTAL_RULE = re.compile(r"^\s*(?:-{4,}|\*{4,}|_{4,})\s*$")
_SPACES = re.compile(r" {2,}")
_SPACE_BEFORE_PUNCT = re.compile(r" +([.,;:!?])(?=\s|$)")
# Bold markers only: "__x__" is as often a Python dunder as markdown emphasis.
_EMPHASIS = re.compile(r"(\*\*)(?=\S)(.+?)(?<=\S)\1")


def compress_text(text: str, *, query: str | None = None) -> str:
    """Return ``text`` with filler and function words removed outside code; raise if nothing changes."""
    del query
    out: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            out.append(line)
            continue
        if in_fence or line.startswith(("    ", "\t")) or line.lstrip().startswith("|"):
            out.append(_TABLE_RULE.sub(_short_rule, line) if not in_fence else line)
            continue
        if _HORIZONTAL_RULE.match(line):
            out.append("---")
            continue
        out.append(_compress_prose_line(line))
    result = "\n".join(out)
    if result == text:
        raise CannotCompress("nothing_to_drop", "no filler words outside code")
    return result


def _short_rule(match: re.Match[str]) -> str:
    cells = match.group(0).strip().strip("|").split("|")
    return "|" + "|".join("-" for _ in cells) + "|"


def _compress_prose_line(line: str) -> str:
    if "`" not in line and "<!--" not in line:
        return _compress_words(line).rstrip()
    # Protected spans (inline code, HTML comments such as CCR markers) are cut out and put back verbatim.
    pieces: list[str] = []
    position = 0
    for match in sorted([*_INLINE_CODE.finditer(line), *_HTML_COMMENT.finditer(line)], key=lambda m: m.start()):
        if match.start() < position:
            continue
        pieces.append(_compress_words(line[position : match.start()]))
        pieces.append(match.group(0))
        position = match.end()
    pieces.append(_compress_words(line[position:]))
    return "".join(pieces).rstrip()


def _phrase(match: re.Match[str]) -> str:
    return _PHRASE_TABLE[int((match.lastgroup or "p0")[1:])][1]


def _compress_words(segment: str) -> str:
    if not segment.strip():
        return segment
    indent = segment[: len(segment) - len(segment.lstrip())]
    body = _PHRASES.sub(_phrase, segment[len(indent) :])
    body = _EMPHASIS.sub(r"\2", body)
    body = _DROP.sub("", body)
    # A dropped word leaves two spaces or a space before punctuation; tidy without touching indentation.
    body = _SPACES.sub(" ", body).lstrip()
    body = _SPACE_BEFORE_PUNCT.sub(r"\1", body)
    if segment.endswith(" ") and not body.endswith(" ") and body:
        body += " "  # the space before an inline code span that follows
    return indent + body
