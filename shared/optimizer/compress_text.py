"""Prose compressor: markup without meaning, telegraphic rewriting and, with a query, extractive selection.

Three steps, each measured on the OpenShift/Prometheus runbooks and SciFact (docs/optimizer.md):

1. **Markup** that costs tokens and says nothing to a reader: ``**bold**`` and ``*italic*`` markers,
   badge images, image sources, HTML comments (never a CCR marker), table rules, Hugo ``weight:`` and a
   front-matter ``title:`` that repeats the heading. A link's target stays the first time it appears in
   a chunk; a repeated target is left at its first place (``links="dedupe"``). With ``links="drop"``
   (the default of query mode) link targets go: the anchor text stays and the original, URLs
   included, is one CCR lookup away.
2. **Telegraphic rewriting**: wordy phrases become short ones (``in order to`` -> ``to``, ``make sure
   that`` -> ``ensure``, ``note that`` -> nothing) and a hand-picked list of articles, forms of "to be",
   pronouns, hedges and intensifiers is dropped. General stop-word lists are not used: they drop
   negations, modals, quantities and prepositions ("not", "no", "must", "all", "from", "without")
   that change what an instruction says, and auxiliaries that are also main verbs (``do``, ``have``) stay:
   "nothing to do with it" must not become "nothing to with it".
3. **Extractive selection** (only with a query, ``select=True``), over paragraph sentences only:
   headings, code, tables and list items (steps and checklists) stay whole; so do the first sentence
   under each heading, the sentence above a code block, every sentence that holds an identifier, a
   number, an error code, inline code or a URL, every warning, prohibition or instruction (``not``,
   ``must``, ``should``, ``check``, ``ignore``...) and those that share a word (Snowball stem) with the
   query; the others become one ``[…]`` per run. Nothing is lost for good: the pipeline keeps the
   original under the CCR hash at the end of the chunk.

Code is never touched: fenced and indented blocks, inline ``code``, URLs and tables stay byte for
byte, and identifiers, numbers and error codes never match a lowercase drop word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import ahocorasick
import Stemmer

from shared.optimizer.outcome import CannotCompress

LinkPolicy = Literal["keep", "dedupe", "drop"]
OMITTED = "[…]"

DROP_WORDS = frozenset(
    {
        "a", "an", "the",
        "is", "are", "was", "were", "be", "been", "being", "am",
        "that",
        "it", "its", "it's", "this", "these", "those", "there",
        "you", "your", "yours", "you'll", "you're", "we", "our", "ours", "us", "i", "my",
        "they", "their", "them",
        "can", "will", "would",
        "just", "really", "very", "quite", "simply", "basically", "actually", "literally",
        "certainly", "definitely", "essentially",
        "please", "kindly", "furthermore", "moreover", "additionally",
    }
)
# Wordy phrases and their short form; matched case-insensitively before single words are dropped.
PHRASES: dict[str, str] = {
    "it is important to note that": "",
    "it is important to remember that": "",
    "it is worth noting that": "",
    "please note that": "",
    "note that": "",
    "keep in mind that": "",
    "bear in mind that": "",
    "it is recommended to": "preferably",
    "it is recommended that": "preferably",
    "it is advisable to": "preferably",
    "due to the fact that": "because",
    "owing to the fact that": "because",
    "in spite of the fact that": "although",
    "in the event that": "if",
    "in the case of": "for",
    "in case of": "on",
    "at this point in time": "now",
    "at the moment": "now",
    "for the purpose of": "for",
    "with regard to": "about",
    "with respect to": "about",
    "in relation to": "about",
    "in order to": "to",
    "in order for": "for",
    "so as to": "to",
    "as well as": "and",
    "a large number of": "many",
    "a small number of": "few",
    "a number of": "several",
    "a lot of": "many",
    "the majority of": "most",
    "is able to": "can",
    "are able to": "can",
    "be able to": "can",
    "has the ability to": "can",
    "make sure that": "ensure",
    "make sure": "ensure",
    "take a look at": "check",
    "have a look at": "check",
    "prior to": "before",
    "subsequent to": "after",
    "whether or not": "whether",
    "each and every": "every",
    "in addition to": "besides",
    "in addition,": "also",
    "for more information, see": "see",
    "for more information see": "see",
    "for more details, see": "see",
    "for more information, refer to": "see",
    "for more details, refer to": "see",
    "refer to": "see",
}

# --- patterns ---------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HORIZONTAL_RULE = re.compile(r"^\s{0,3}(?:-{4,}|\*{4,}|_{4,})\s*$")
_CCR = re.compile(r"<!--\s*CCR:")
# What ends a paragraph: a blank line, a list item, a fence, a heading, a table row or a comment (one
# match per line instead of five).
_PARAGRAPH_BREAK = re.compile(r"\s*(?:$|(?:[-*+]|\d{1,3}[.)])\s|\||<!--)|\s{0,3}(?:`{3,}|~{3,}|#{1,6}(?:\s|$))")
_TITLE_WORDS = re.compile(r"[a-z0-9]+")

# Drop words are matched as whole blank-separated words (a set lookup, no regex): a word glued to a quote,
# a bracket, a slash, a dot or a dash (``'the'``, ``a/b``, ``it.only``) is never one of them.
_DROP_SET = frozenset(DROP_WORDS | {w.capitalize() for w in DROP_WORDS if len(w) > 1})
# Spans given back untouched (code, comments, URLs) or rewritten as markup (links, images, badges); the
# prose between them is rewritten word by word. Only run when a block holds one of the trigger characters.
_SPANS = re.compile(
    r"(?=[`<\[!hf])(?:"  # a leading class lets the engine skip to candidates
    # Possessive parts that cannot run over the next opener: an unmatched backtick, "<!--", "[" or "]("
    # in a huge paragraph must not make the engine scan the rest of it again for each one (linear time).
    r"(?P<code>`[^`]{1,1000}+`|``(?:[^`]|`(?!`)){1,1000}+``|(?P<ticks>`{3,})(?:(?!(?P=ticks)).){1,1000}?(?P=ticks))"
    r"|(?P<comment><!--(?:[^\n<-]|-(?!->)|<(?!!--)){0,300}+-->)"
    r"|(?P<badge>\[!\[[^\[\]\n]{0,300}+\]\([^()\[\]\s]{0,2000}+\)\]\([^()\[\]\s]{0,2000}+\))"
    r"|(?P<image>!\[(?P<alt>[^\[\]\n]{0,300}+)\]\([^()\[\]\s]{1,2000}+(?:[ \t]++\"[^\"\n]{0,300}+\")?\))"
    r"|(?P<link>\[(?P<text>[^\[\]\n]{1,300}+)\]\((?P<target><[^<>\n]{0,2000}+>|[^()\[\]\s]{1,2000}+)"
    r"(?:[ \t]++\"[^\"\n]{0,300}+\")?\))"
    r"|(?P<autolink><(?P<auto>https?://[^<>\s]{1,2000}+)>)"
    r"|(?P<url>(?<!\w)(?:https?|ftp)://[^\s<>\])]++))",
    re.DOTALL,
)
_SPAN_TRIGGERS = ("`", "<", "[", "://")
_EMPHASIS = re.compile(
    r"(?<![\w*])\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*(?![\w*])|(?<![\w*\\])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*\\])\*(?![\w*])"
)


@lru_cache(maxsize=1)
def _phrase_automaton() -> ahocorasick.Automaton:
    automaton = ahocorasick.Automaton()
    for phrase, short in PHRASES.items():
        automaton.add_word(phrase, (len(phrase), short))
    automaton.make_automaton()
    return automaton


# A sentence that holds a fact the reader may need verbatim: a digit, inline code, a URL or path, a
# variable, a flag, an identifier (snake_case, dotted or dashed names, CamelCase) or an ALLCAPS code.
_FACT_CHARS = frozenset("0123456789`$_/")
# Warnings, prohibitions and instructions stay whatever the query: "Do not purge the queue", "You can
# safely ignore it" and "Otherwise, check the node" are the sentences a reader acts on. ("n't" counts too.)
_CAUTION_WORDS = frozenset(
    {"not", "never", "no", "cannot", "must", "should", "need", "needs", "avoid", "warning", "caution", "danger",
     "important", "only", "ensure", "verify", "check", "ignore", "safe", "safely", "required"}
)
_FACT = re.compile(r"[a-z][A-Z]|E[A-Z]{3,}\b|(?<!\S)--?\w|\w:\w|[A-Za-z]\.[A-Za-z]+[.\w]*[A-Za-z]\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[`*$])")
_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "etc.", "vs.", "fig.", "al.", "approx.", "no.", "cf.", "ca.", "resp.",
                            "eq.", "ref.", "dr.", "mr.", "ms.", "st."})
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[a-z]+")
# Words too common to say whether a sentence is about the query (the drop words are added below).
_QUERY_STOP = frozenset(
    {"of", "to", "in", "on", "for", "with", "by", "at", "from", "as", "or", "and", "if", "when", "what", "how",
     "why", "which", "who", "whom", "where", "than", "then", "so", "not", "no", "into", "about", "after",
     "before", "over", "under", "between", "during", "its", "such", "may", "might", "should", "could", "all",
     "any", "some", "more", "most", "other", "only", "own", "same", "too", "each", "both", "few", "get",
     "use", "used", "using", "one", "two", "also", "does", "doing"}
) | DROP_WORDS


@dataclass
class _Block:
    kind: str  # front, fence, indent, table, heading, blank, comment, rule, prose
    lines: list[str]


# --- entry point ------------------------------------------------------------------------------------


def compress_text(text: str, *, query: str | None = None, select: bool = True,
                  links: LinkPolicy | None = None, min_query_matches: int | None = None) -> str:
    """Return ``text`` shorter and with the same meaning; raise :class:`CannotCompress` if nothing changes.

    ``query`` (with ``select``) turns on extractive selection; ``links`` says what happens to link
    targets (default: ``drop`` with selection, ``dedupe`` without); ``min_query_matches`` is how many
    query stems an otherwise unprotected sentence must share to stay (default 1: on SciFact's train
    queries 2 saved 7 more points and cost 0.010 of BM25 nDCG@10, see docs/optimizer.md).
    """
    blocks = _blocks(text)
    selecting = bool(select and query and query.strip())
    policy: LinkPolicy = links or ("drop" if selecting else "dedupe")
    if selecting:
        blocks = _select(blocks, query or "", min_query_matches)
    seen_targets: set[str] = set()
    out: list[str] = []
    title = _first_heading_words(blocks)
    for block in blocks:
        kind = block.kind
        if kind == "prose":
            out.append(_rewrite("\n".join(block.lines), policy, seen_targets))
        elif kind == "front":
            out.extend(_front_matter(block.lines, title))
        elif kind == "table":
            out.extend(_TABLE_RULE.sub(_short_rule, line) for line in block.lines)
        elif kind == "comment":
            out.extend(line for line in block.lines if _CCR.search(line))
        elif kind == "rule":
            out.append("---")
        else:
            out.extend(block.lines)
    result = "\n".join(_squeeze_blank(out))
    if result == text or result == text.rstrip("\n"):
        raise CannotCompress("nothing_to_drop", "no markup, filler or off-query sentences outside code")
    return result


# --- blocks -----------------------------------------------------------------------------------------


def _blocks(text: str) -> list[_Block]:
    """One pass over the lines: code, tables, headings, comments and prose paragraphs (list items apart)."""
    lines = text.splitlines()
    blocks: list[_Block] = []
    index = 0
    count = len(lines)
    if count and lines[0].strip() == "---":
        for end in range(1, min(count, 60)):
            if lines[end].strip() in {"---", "..."}:
                blocks.append(_Block("front", lines[: end + 1]))
                index = end + 1
                break
    previous_blank = True
    while index < count:
        line = lines[index]
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            end = index + 1
            while end < count and not lines[end].lstrip().startswith(marker[0] * len(marker)):
                end += 1
            blocks.append(_Block("fence", lines[index : end + 1]))
            index = end + 1
            previous_blank = False
            continue
        stripped = line.strip()
        if not stripped:
            blocks.append(_Block("blank", [line]))
            index += 1
            previous_blank = True
            continue
        if previous_blank and (line.startswith("\t") or line.startswith("    ")) and not _LIST_ITEM.match(line):
            end = index
            while end < count and (not lines[end].strip() or lines[end].startswith(("\t", "    "))):
                end += 1
            while end > index and not lines[end - 1].strip():
                end -= 1
            blocks.append(_Block("indent", lines[index:end]))
            index = end
            previous_blank = False
            continue
        previous_blank = False
        if stripped.startswith("|"):
            end = index
            while end < count and lines[end].strip().startswith("|"):
                end += 1
            blocks.append(_Block("table", lines[index:end]))
            index = end
            continue
        if stripped.startswith("<!--"):
            end = index
            while end < count and "-->" not in lines[end]:
                end += 1
            if end < count:
                blocks.append(_Block("comment", lines[index : end + 1]))
                index = end + 1
                continue
        if _HEADING.match(line):
            blocks.append(_Block("heading", [line]))
            index += 1
            continue
        if _HORIZONTAL_RULE.match(line):
            blocks.append(_Block("rule", [line]))
            index += 1
            continue
        # A paragraph or one list item with its continuation lines.
        end = index + 1
        while end < count and not _PARAGRAPH_BREAK.match(lines[end]):
            end += 1
        blocks.append(_Block("prose", lines[index:end]))
        index = end
    return blocks


def _squeeze_blank(lines: Iterable[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _short_rule(match: re.Match[str]) -> str:
    cells = match.group(0).strip().strip("|").split("|")
    return "|" + "|".join("-" for _ in cells) + "|"


def _first_heading_words(blocks: list[_Block]) -> str:
    for block in blocks:
        if block.kind == "heading":
            return "".join(_TITLE_WORDS.findall(block.lines[0].lower()))
    return ""


def _front_matter(lines: list[str], title: str) -> list[str]:
    """Front matter without a title that the first heading says again."""
    kept = [lines[0]]
    for line in lines[1:-1]:
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "title" and title and "".join(_TITLE_WORDS.findall(value.lower())) == title:
            continue
        kept.append(line)
    if len(kept) == 1:
        return []
    return [*kept, lines[-1]]


# --- rewriting --------------------------------------------------------------------------------------


def _rewrite(block: str, links: LinkPolicy, seen_targets: set[str]) -> str:
    """Markup, phrases and drop words out of one prose block; protected spans stay byte for byte."""
    if not any(trigger in block for trigger in _SPAN_TRIGGERS):
        return _rewrite_words(block)
    out: list[str] = []
    position = 0
    for match in _SPANS.finditer(block):
        out.append(_rewrite_words(block[position : match.start()]))
        out.append(_span(match, links, seen_targets))
        position = match.end()
    out.append(_rewrite_words(block[position:]))
    return "".join(out)


def _span(match: re.Match[str], links: LinkPolicy, seen_targets: set[str]) -> str:
    group = match.lastgroup
    if group == "link":
        target = match.group("target").strip("<>")
        label = match.group("text")
        if links == "keep":
            return match.group(0)
        if label.strip() == target or "://" in label:
            return target
        if links == "drop" or target in seen_targets:
            return _rewrite(label, "keep", seen_targets)  # code inside the label stays code
        seen_targets.add(target)
        return match.group(0)
    if group == "autolink":
        return match.group("auto")
    if group == "badge":
        return ""
    if group == "image":
        return match.group("alt")
    if group == "comment":
        return match.group(0) if _CCR.match(match.group(0)) else ""
    return match.group(0)  # code, url


def _rewrite_words(segment: str) -> str:
    if not segment:
        return segment
    if "*" in segment:
        segment = _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), segment)
    lowered = segment.lower()
    hits = sorted((end - length + 1, -length, short) for end, (length, short) in _phrase_automaton().iter(lowered))
    if hits:
        pieces: list[str] = []
        position = 0
        for start, negative_length, short in hits:
            end = start - negative_length - 1
            if start < position:
                continue
            if (start > 0 and not lowered[start - 1].isspace()) or (
                    end + 1 < len(lowered) and (lowered[end + 1].isalnum() or lowered[end + 1] in "_-'\"`/")):
                continue
            pieces.append(segment[position:start])
            if short and segment[start].isupper():
                short = short.capitalize()
            pieces.append(short)
            position = end + 1
            if not short and lowered[position : position + 1] == " ":
                position += 1  # "note that the pod" -> "pod", not " pod"
        pieces.append(segment[position:])
        segment = "".join(pieces)
    lines = segment.split("\n")
    for number, line in enumerate(lines):
        words = line.split(" ")
        kept = [word for word in words if word not in _DROP_SET]
        if len(kept) != len(words):
            # Splitting on single blanks keeps indentation and double blanks as empty words.
            lines[number] = " ".join(kept)
    return "\n".join(lines)


# --- selection --------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _stems(text: str) -> set[str]:
    return _stems_of([w.lower() for w in _WORD.findall(text)])


def _stems_of(words: list[str]) -> set[str]:
    return set(_stemmer().stemWords([w for w in words if w not in _QUERY_STOP and len(w) > 1]))


def _sentences(paragraph: str) -> list[str]:
    pieces = _SENTENCE_END.split(paragraph)
    merged: list[str] = []
    for piece in pieces:
        if merged and (merged[-1].rsplit(None, 1)[-1].lower() in _ABBREVIATIONS
                       or re.search(r"\b[A-Z]\.$", merged[-1])):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    return merged


def _select(blocks: list[_Block], query: str, min_matches: int | None) -> list[_Block]:
    """Keep what holds facts or matches the query; every run of dropped sentences becomes one ``[…]``."""
    wanted = _stems(query)
    if not wanted:
        return blocks
    need = min_matches if min_matches is not None else 1

    def keeps(sentence: str, lead: bool) -> bool:
        if lead or not _FACT_CHARS.isdisjoint(sentence) or _FACT.search(sentence) is not None:
            return True
        words = [w.lower() for w in _WORD.findall(sentence)]
        if not _CAUTION_WORDS.isdisjoint(words) or "n't" in sentence:
            return True
        return len(wanted & _stems_of(words)) >= need

    out: list[_Block] = []
    lead = True  # the first sentence under a heading says what the section is about
    dropping = False  # the last thing emitted is an omission marker

    def omit() -> None:
        nonlocal dropping
        if not dropping:
            out.append(_Block("prose", [OMITTED]))
            dropping = True

    # A sentence right above a code block says what the code is for: it stays with the code.
    before_code: set[int] = set()
    following = ""
    for position in range(len(blocks) - 1, -1, -1):
        kind = blocks[position].kind
        if kind == "prose" and following in {"fence", "indent"}:
            before_code.add(position)
        if kind != "blank":
            following = kind

    for position, block in enumerate(blocks):
        if block.kind != "prose":
            if block.kind == "heading":
                lead = True
            if block.kind not in {"blank", "comment"}:
                dropping = False
            out.append(block)
            continue
        first = block.lines[0]
        if _LIST_ITEM.match(first):
            # A list item is a step or an item of a checklist: it is kept whole, never judged alone.
            out.append(block)
            dropping = False
            lead = False
            continue
        sentences = _sentences("\n".join(line.strip() for line in block.lines))
        verdicts = [keeps(sentence, lead and number == 0) for number, sentence in enumerate(sentences)]
        if position in before_code:
            verdicts[-1] = True
        lead = False
        if all(verdicts):
            out.append(block)
            dropping = False
            continue
        if not any(verdicts):
            omit()
            continue
        parts: list[str] = []
        for sentence, keep in zip(sentences, verdicts, strict=True):
            if keep:
                parts.append(sentence)
            elif not parts or parts[-1] != OMITTED:
                parts.append(OMITTED)
        indent = first[: len(first) - len(first.lstrip())]
        out.append(_Block("prose", [indent + " ".join(parts)]))
        dropping = parts[-1] == OMITTED
    return out
