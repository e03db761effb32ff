"""Parse a vault markdown file and cut it into chunks for embedding and lexical search.

Block structure follows CommonMark: ATX (``#``) and setext (``===``/``---`` underline) headings,
fenced (```` ``` ````/``~~~``) and indented code, HTML blocks, list items and block quotes, so a ``#``
inside a code fence is never a heading. Only top-level headings split the document (a heading inside a
list item or a block quote stays part of its section). YAML front matter (``---`` ... ``---`` or ``...``
on the first lines) is read with ``yaml.safe_load``; broken YAML leaves the front matter empty.

Chunk levels (``shared.vault.document``):

* **L0** (``LEVEL_DOCUMENT``), exactly one per document, ordinal 0: the title, the front matter
  ``description``/``summary`` and the lead text (the text before the first heading) cut at a
  paragraph, line or sentence boundary to fit ``max_tokens``. A document that starts with a heading
  has no lead text: its L0 chunk is the title and summary alone (its first section is a chunk anyway).
* **L1** (``LEVEL_SECTION``): one per heading section that fits in ``max_tokens``: its heading line and
  body. A heading with no body folds into the next section's chunk instead of making an empty chunk.
  The text before the first heading only gets its own L1/L2 chunks when it did not fit whole into L0.
* **L2** (``LEVEL_PIECE``): a section longer than ``max_tokens`` is cut into pieces at block, then
  paragraph, then line boundaries, never inside a code fence unless one fence alone is too long (then
  by lines; a paragraph on a single line too long is cut after a sentence, a sentence too long between
  words, a single word between characters). Each
  piece but the first starts with the section's heading line for context followed by about
  ``overlap_tokens`` of the previous piece's tail, and stays within ``max_tokens``.

Chunk ids are ``sha256(doc_key + NUL + ordinal)`` (hex, 32 chars), so re-chunking an unchanged file
gives the same ids. Everything here is a pure, deterministic function of its arguments.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import PurePosixPath
from typing import Any

import yaml

from shared.vault.document import (
    LEVEL_DOCUMENT,
    LEVEL_PIECE,
    LEVEL_SECTION,
    Chunk,
    ParsedDocument,
    Section,
)

TokenCounter = Callable[[str], int]

# Bumped whenever a change here cuts the same file into different chunks, so stored documents are
# re-chunked by the next ingest (see chunker_recipe).
CHUNKER_VERSION = 3

# A chunk never holds more than this many characters per token of budget, so a base64 blob or a
# minified file that the tokenizer squeezes into a few [UNK] tokens cannot make a megabyte chunk.
MAX_CHARS_PER_TOKEN = 16

_BREADCRUMB_SEP = " > "
_MEMO_ENTRIES = 50_000
_WORD_RE = re.compile(r"\s*\S+")
# A sentence ends at . ! or ? (closing quotes and brackets may follow) before a space and a capital,
# digit or opening bracket. "e.g. The" also matches: that only adds a cut point, it never drops text.
_SENTENCE_END_RE = re.compile(r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9])")

# How good a place is to cut *before* a line or a piece of one (higher is better).
_CUT_NEVER = 0  # inside a code block, or inside a code line cut in pieces
_CUT_WORD = 1  # between two words of a sentence too long for a chunk
_CUT_SENTENCE = 2  # between two sentences of a paragraph line too long for a chunk
_CUT_LINE = 3
_CUT_BLOCK = 4  # a blank line or the start of a block (paragraph, list item, fence, heading)


# --------------------------------------------------------------------------------------------------
# Public API


def slugify(title: str) -> str:
    """GitHub's heading anchor for ``title`` (github-slugger): lowercase, punctuation dropped, spaces to ``-``.

    Letters, digits, combining marks, ``_`` and ``-`` are kept in any script; no trimming or
    collapsing, so ``"a  b"`` becomes ``"a--b"`` exactly as on GitHub.
    """
    kept = []
    for char in title.lower():
        if char in "_- " or unicodedata.category(char)[0] in "LNM":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def chunker_recipe(max_tokens: int, overlap_tokens: int) -> str:
    """What decides how a file is cut: the chunker's version and its budget. Stored per document."""
    return f"v{CHUNKER_VERSION}:{max_tokens}:{overlap_tokens}"


def parse_sections(text: str) -> list[Section]:
    """Split markdown ``text`` into heading sections with GitHub-style, deduplicated anchors.

    Front matter is skipped; text before the first heading, if not blank, is a level-0 section with an
    empty title and anchor. Line numbers are 1-based in the original file (CRLF and CR count as one
    line break); a section ends at its last non-blank line.
    """
    return _analyse(text).sections


def parse_markdown(
    path: str,
    text: str,
    *,
    doc_key: str,
    max_tokens: int,
    overlap_tokens: int,
    count_tokens: TokenCounter,
) -> ParsedDocument:
    """Parse one vault file into front matter, sections and L0/L1/L2 chunks (see the module docstring).

    ``path`` is the file's path inside its project folder (its folders start every breadcrumb),
    ``doc_key`` is ``"<project>/<path>"`` and seeds the chunk ids, ``count_tokens`` is the embedding
    model's token counter. Raises ``TypeError``/``ValueError`` on arguments it cannot work with.
    """
    if not isinstance(text, str):
        raise TypeError(f"markdown text must be str, not {type(text).__name__}")
    if not isinstance(path, str) or not path.strip():
        raise ValueError("path must be a non-empty string")
    if not isinstance(doc_key, str) or not doc_key:
        raise ValueError("doc_key must be a non-empty string")
    budget = _Budget(count_tokens, max_tokens, overlap_tokens)
    layout = _analyse(text)
    title = _document_title(layout, path)
    builder = _ChunkBuilder(layout, budget, doc_key, _folder_crumbs(path), title)
    chunks = builder.build(_summary(layout.front_matter))
    return ParsedDocument(
        path=path,
        title=title,
        front_matter=layout.front_matter,
        tags=_tags(layout.front_matter.get("tags")),
        content_sha=_sha256(text),
        sections=layout.sections,
        chunks=chunks,
    )


# --------------------------------------------------------------------------------------------------
# Structure: front matter, headings, sections, where lines may be cut


@dataclass(frozen=True, slots=True)
class _Heading:
    start: int  # 0-based index of the first line
    end: int  # 0-based, exclusive (a setext heading spans two lines)
    level: int
    title: str


@dataclass
class _Layout:
    lines: list[str]
    front_matter: dict[str, Any]
    body_start: int  # 0-based index of the first line after the front matter
    headings: list[_Heading]
    sections: list[Section]
    cut_scores: list[int]  # per line: how good a place it is to cut before it


def _analyse(text: str) -> _Layout:
    if not isinstance(text, str):
        raise TypeError(f"markdown text must be str, not {type(text).__name__}")
    normalised = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    # split("\n"), not splitlines(): a form feed or U+2028 inside a line is not a line break.
    lines = normalised.split("\n")
    front_matter, body_start = _split_front_matter(lines)
    headings, cut_scores = _BlockScanner(lines).scan(body_start)
    sections = _sections(lines, body_start, headings)
    return _Layout(lines, front_matter, body_start, headings, sections, cut_scores)


def _split_front_matter(lines: list[str]) -> tuple[dict[str, Any], int]:
    if not lines or lines[0].rstrip() != "---":
        return {}, 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            try:
                data = yaml.safe_load("\n".join(lines[1:index]))
            except (yaml.YAMLError, ValueError, RecursionError):
                # Broken front matter must not cost the document: index the body without metadata.
                data = None
            return (_json_safe(data) if isinstance(data, dict) else {}), index + 1
    return {}, 0  # an opening --- that never closes is a thematic break, not front matter


def _json_safe(value: Any) -> Any:
    """YAML gives dates and non-string keys; the front matter is stored as JSON, so flatten them."""
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_safe(item) for item in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


# The block structure is found by a one-pass line scanner rather than a full CommonMark parser.
# markdown-it-py gave the same headings but costs ~30 us and several token objects per line in pure
# Python: a 2 MB file of list items took a minute and ~1 GB. Chunking only needs top-level headings
# and the extent of code blocks, which this scanner finds in linear time and constant state, following
# the CommonMark rules for them (tests/test_markdown.py checks it against markdown-it on generated
# documents).

# A line whose first non-space character is none of these can only be paragraph text.
_BLOCK_MARKERS = frozenset("#`~=-*_+<>0123456789")
_ATX_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t](.*))?$")
_ATX_CLOSING_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE_OPEN_RE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*$")
_SETEXT_RE = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_HR_RE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_RE = re.compile(r"( {0,3})([-+*]|(\d{1,9})[.)])([ \t]+|$)")
_QUOTE_RE = re.compile(r" {0,3}> ?")
_HTML_CLOSED_BY = (  # CommonMark HTML blocks 1-5: (start, what ends them)
    (
        re.compile(r" {0,3}<(?:pre|script|style|textarea)(?:[\s>]|$)", re.IGNORECASE),
        re.compile(r"</(?:pre|script|style|textarea)>", re.IGNORECASE),
    ),
    (re.compile(r" {0,3}<!--"), re.compile(r"-->")),
    (re.compile(r" {0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r" {0,3}<![A-Za-z]"), re.compile(r">")),
    (re.compile(r" {0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
)
_HTML_BLOCK_TAGS = (
    "address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|"
    "dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h1|h2|h3|h4|h5|h6|head|header|"
    "hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|"
    "section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul"
)
_HTML_TO_BLANK_RE = re.compile(rf" {{0,3}}</?(?:{_HTML_BLOCK_TAGS})(?:[\s>]|/>|$)", re.IGNORECASE)  # type 6
_HTML_TAG_LINE_RE = re.compile(  # type 7: a lone complete tag; cannot interrupt a paragraph
    r" {0,3}(?:<[A-Za-z][A-Za-z0-9-]*(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'=<>`]+))?)*"
    r"\s*/?>|</[A-Za-z][A-Za-z0-9-]*\s*>)\s*$"
)

# Inline markup dropped from heading titles, in this order (code spans first: nothing inside them is markup).
_CODE_SPAN_RE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_IMAGE_RE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK_RE = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
_AUTOLINK_RE = re.compile(r"<((?:https?|ftp|mailto):[^>\s]*)>", re.IGNORECASE)
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_EMPHASIS_RE = re.compile(r"\*+(?=\S)|(?<=\S)\*+|(?<![A-Za-z0-9])_+|_+(?![A-Za-z0-9])|~~")
_ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


def heading_text(source: str) -> str:
    """The rendered text of a heading's markdown (what GitHub slugs): markup, links and HTML dropped."""
    spans: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        content = match.group(2)
        if content.startswith(" ") and content.endswith(" ") and content.strip():
            content = content[1:-1]
        spans.append(content)
        return f"\0{len(spans) - 1}\0"

    text = _CODE_SPAN_RE.sub(keep_code, source)
    text = _ESCAPE_RE.sub(lambda m: f"\0e{ord(m.group(1))}\0", text)  # escaped chars are not markup
    text = _IMAGE_RE.sub(r"\1", text)
    text = _LINK_RE.sub(r"\1", text)
    text = _AUTOLINK_RE.sub(r"\1", text)
    text = _HTML_TAG_RE.sub("", text)
    text = _EMPHASIS_RE.sub("", text)
    text = re.sub(r"\0e(\d+)\0", lambda m: chr(int(m.group(1))), text)
    text = re.sub(r"\0(\d+)\0", lambda m: spans[int(m.group(1))], text)
    return " ".join(html.unescape(text).split())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


class _BlockScanner:
    """Finds top-level headings and code blocks line by line (see the comment above)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.scores = [_CUT_LINE] * len(lines)
        self.headings: list[_Heading] = []
        # Top-level leaf state.
        self.fence: tuple[str, int] | None = None  # (fence char, length) of an open fenced code block
        self.html_end: re.Pattern[str] | None = None  # an open HTML block of types 1-5
        self.html_to_blank = False  # an open HTML block of types 6-7
        self.indented_code = False
        self.paragraph_start: int | None = None  # first line of an open top-level paragraph
        # Container state: headings inside list items and block quotes do not split the document.
        self.container: str | None = None  # "quote" or "list"
        self.content_indent = 0  # column where the current list item's content starts
        self.inner_fence: tuple[str, int] | None = None
        self.inner_paragraph = False
        self.empty_item = False  # the open list item has no content yet
        self.previous_blank = True

    def scan(self, start: int) -> tuple[list[_Heading], list[int]]:
        """Return the top-level headings and, per line, how good a place it is to cut before it."""
        for index in range(start, len(self.lines)):
            line = self.lines[index].expandtabs(4)
            blank = not line.strip()
            if self.container is not None and self._in_container(index, line, blank):
                self.previous_blank = blank
                continue
            self._top_level(index, line, blank)
            self.previous_blank = blank
        return self.headings, self.scores

    # -- containers (list items, block quotes) -----------------------------------------------------

    def _in_container(self, index: int, line: str, blank: bool) -> bool:
        """Feed ``line`` to the open container; False if it closes the container."""
        content: str | None
        starts_empty_item = False
        if self.container == "quote":
            marker = _QUOTE_RE.match(line)
            if marker:
                content = line[marker.end() :]
            elif blank or self.inner_fence or not self.inner_paragraph or self._starts_block(line):
                content = None
            else:
                content = line  # a lazy continuation of the quoted paragraph
        elif blank:
            # A list item may start with at most one blank line: an empty item followed by one is over.
            content = None if self.empty_item else ""
        elif _indent(line) >= self.content_indent:
            content = line[self.content_indent :]
        elif (item := self._list_item(line)) is not None and not _HR_RE.match(line):
            self.content_indent = item[0]
            self.inner_fence, self.inner_paragraph = None, False
            content = item[1]
            starts_empty_item = not content.strip()
            self.scores[index] = _CUT_BLOCK
        elif self.inner_paragraph and not self.previous_blank and not self._starts_block(line):
            content = line
        else:
            content = None
        self.empty_item = starts_empty_item
        if content is None:
            self.container, self.inner_fence, self.inner_paragraph = None, None, False
            return False
        self._container_content(index, content)
        return True

    def _container_content(self, index: int, content: str) -> None:
        if self.inner_fence is not None:
            self.scores[index] = _CUT_NEVER
            close = _FENCE_CLOSE_RE.match(content)
            if (
                close
                and close.group(1)[0] == self.inner_fence[0]
                and len(close.group(1)) >= self.inner_fence[1]
            ):
                self.inner_fence = None
            return
        if not content.strip():
            self.inner_paragraph = False
            self.scores[index] = _CUT_BLOCK
            return
        fence = self._fence_open(content)
        if fence is not None:
            self.inner_fence, self.inner_paragraph = fence, False
        else:
            self.inner_paragraph = not (_ATX_RE.match(content) or _HR_RE.match(content))

    def _list_item(self, line: str) -> tuple[int, str] | None:
        """(content column, content) if ``line`` starts a list item."""
        match = _LIST_RE.match(line)
        if not match:
            return None
        spaces = len(match.group(4))
        rest = line[match.end() :]
        width = len(match.group(1)) + len(match.group(2))
        if not rest.strip():
            return width + 1, ""
        if spaces > 4:  # the content is indented code: the item's content starts one space in
            return width + 1, line[width + 1 :]
        return width + spaces, rest

    def _starts_block(self, line: str) -> bool:
        """Whether ``line`` opens a block that may interrupt a paragraph (so it is no lazy continuation)."""
        return bool(
            _ATX_RE.match(line)
            or self._fence_open(line)
            or _HR_RE.match(line)
            or _QUOTE_RE.match(line)
            or _LIST_RE.match(line)  # (markdown-it ends a lazy container paragraph at any list item)
            or _HTML_TO_BLANK_RE.match(line)
            or any(start.match(line) for start, _ in _HTML_CLOSED_BY)
        )

    def _interrupting_list_item(self, line: str) -> bool:
        match = _LIST_RE.match(line)
        if not match or not line[match.end() :].strip():
            return False  # an empty item cannot interrupt a paragraph
        number = match.group(3)
        return number is None or int(number) == 1

    @staticmethod
    def _fence_open(line: str) -> tuple[str, int] | None:
        match = _FENCE_OPEN_RE.match(line)
        if not match:
            return None
        marker = match.group(2)
        if marker[0] == "`" and "`" in match.group(3):
            return None  # a backtick fence's info string cannot hold a backtick (it is inline code)
        return marker[0], len(marker)

    # -- top level -----------------------------------------------------------------------------------

    def _top_level(self, index: int, line: str, blank: bool) -> None:
        if self.fence is not None:
            self.scores[index] = _CUT_NEVER
            close = _FENCE_CLOSE_RE.match(line)
            if close and close.group(1)[0] == self.fence[0] and len(close.group(1)) >= self.fence[1]:
                self.fence = None
            return
        if self.html_end is not None:
            self.scores[index] = _CUT_NEVER
            if self.html_end.search(line):
                self.html_end = None
            return
        if self.html_to_blank:
            if not blank:
                return
            self.html_to_blank = False
        if self.indented_code:
            if blank or _indent(line) >= 4:
                self.scores[index] = _CUT_BLOCK if blank else _CUT_NEVER
                return
            self.indented_code = False
        if blank:
            self.paragraph_start = None
            self.scores[index] = _CUT_BLOCK
            return
        self._top_level_block(index, line)

    def _top_level_block(self, index: int, line: str) -> None:
        paragraph_start = self.paragraph_start
        in_paragraph = paragraph_start is not None
        self.scores[index] = _CUT_BLOCK
        indent = _indent(line)
        if indent >= 4 and not in_paragraph:
            self.indented_code = True
            return
        if indent >= 4 or line[indent] not in _BLOCK_MARKERS:  # plain text: skip the block patterns
            self._paragraph_line(index, paragraph_start)
            return
        if paragraph_start is not None and (setext := _SETEXT_RE.match(line)):
            source = " ".join(text.strip() for text in self.lines[paragraph_start:index])
            level = 1 if setext.group(1)[0] == "=" else 2
            self.headings.append(_Heading(paragraph_start, index + 1, level, heading_text(source)))
            self.scores[index] = _CUT_NEVER
            self.paragraph_start = None
            return
        self.paragraph_start = None
        if atx := _ATX_RE.match(line):
            source = _ATX_CLOSING_RE.sub("", (atx.group(2) or "").strip())
            self.headings.append(_Heading(index, index + 1, len(atx.group(1)), heading_text(source)))
            return
        if (fence := self._fence_open(line)) is not None:
            self.fence = fence
            return
        for start, end in _HTML_CLOSED_BY:
            if start.match(line):
                if not end.search(line, start.match(line).end()):
                    self.html_end = end
                return
        if _HTML_TO_BLANK_RE.match(line) or (not in_paragraph and _HTML_TAG_LINE_RE.match(line)):
            self.html_to_blank = True
            return
        if _HR_RE.match(line):
            return
        if marker := _QUOTE_RE.match(line):
            self.container, self.inner_fence, self.inner_paragraph = "quote", None, False
            self._container_content(index, line[marker.end() :])
            return
        item = self._list_item(line)
        if item is not None and (not in_paragraph or self._interrupting_list_item(line)):
            self.container, self.inner_fence, self.inner_paragraph = "list", None, False
            self.content_indent = item[0]
            self.empty_item = not item[1].strip()
            self._container_content(index, item[1])
            return
        self._paragraph_line(index, paragraph_start)

    def _paragraph_line(self, index: int, paragraph_start: int | None) -> None:
        if paragraph_start is not None:  # a continuation line of the paragraph
            self.scores[index] = _CUT_LINE
            self.paragraph_start = paragraph_start
        else:
            self.paragraph_start = index


def _last_non_blank(lines: list[str], start: int, stop: int) -> int:
    """Index of the last non-blank line in ``lines[start:stop]``, or ``start - 1`` if all are blank."""
    for index in range(stop - 1, start - 1, -1):
        if lines[index].strip():
            return index
    return start - 1


def _sections(lines: list[str], body_start: int, headings: list[_Heading]) -> list[Section]:
    sections = []
    first_heading = headings[0].start if headings else len(lines)
    lead_end = _last_non_blank(lines, body_start, first_heading)
    if lead_end >= body_start:
        lead_start = next(i for i in range(body_start, lead_end + 1) if lines[i].strip())
        sections.append(
            Section("", 0, "", lead_start + 1, lead_end + 1, "\n".join(lines[lead_start : lead_end + 1]))
        )
    seen: dict[str, int] = {}
    for index, heading in enumerate(headings):
        stop = headings[index + 1].start if index + 1 < len(headings) else len(lines)
        end = max(_last_non_blank(lines, heading.start, stop), heading.end - 1)
        sections.append(
            Section(
                title=heading.title,
                level=heading.level,
                anchor=_unique_anchor(slugify(heading.title), seen),
                start_line=heading.start + 1,
                end_line=end + 1,
                content="\n".join(lines[heading.start : end + 1]),
            )
        )
    return sections


def _unique_anchor(slug: str, seen: dict[str, int]) -> str:
    """github-slugger's rule: the second "foo" is "foo-1", then "foo-2", skipping any already taken.

    ``seen`` maps every anchor given out to how many times its base slug has been repeated, so a
    thousand equal headings cost a thousand steps, not a million.
    """
    candidate = slug
    while candidate in seen:
        seen[slug] += 1
        candidate = f"{slug}-{seen[slug]}"
    seen[candidate] = 0
    return candidate


# --------------------------------------------------------------------------------------------------
# Metadata


def _document_title(layout: _Layout, path: str) -> str:
    title = layout.front_matter.get("title")
    if title is not None and str(title).strip():
        return " ".join(str(title).split())
    for heading in layout.headings:
        if heading.level == 1 and heading.title:
            return heading.title
    stem = PurePosixPath(path).stem
    return stem or path


def _summary(front_matter: dict[str, Any]) -> str:
    for key in ("description", "summary"):
        value = front_matter.get(key)
        if value is not None and str(value).strip():
            return str(value).strip()
    return ""


def _tags(raw: Any) -> list[str]:
    if isinstance(raw, str):
        items: list[Any] = raw.split(",")
    elif isinstance(raw, list):
        items = raw
    else:
        return []
    tags: list[str] = []
    for item in items:
        if isinstance(item, dict | list) or item is None:
            continue
        tag = str(item).strip()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def _folder_crumbs(path: str) -> list[str]:
    return [part for part in PurePosixPath(path).parent.parts if part not in ("", ".", "/")]


def _sha256(text: str) -> str:
    # surrogatepass: a str decoded with errors="surrogateescape" must still hash, not crash.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunk_id(doc_key: str, ordinal: int) -> str:
    """The stable id of chunk ``ordinal`` of document ``doc_key``."""
    return hashlib.sha256(f"{doc_key}\0{ordinal}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


# --------------------------------------------------------------------------------------------------
# Token budget and cutting


class _Budget:
    """Token arithmetic: the counter's fixed overhead (e.g. [CLS] and [SEP]) is paid once per chunk."""

    def __init__(self, count_tokens: TokenCounter, max_tokens: int, overlap_tokens: int) -> None:
        if not callable(count_tokens):
            raise TypeError("count_tokens must be a callable str -> int")
        self.count = count_tokens
        self.overhead = max(0, int(count_tokens("")))
        if not isinstance(max_tokens, int) or max_tokens - self.overhead < 8:
            raise ValueError(f"max_tokens must leave room for at least 8 tokens of text, got {max_tokens!r}")
        if (
            not isinstance(overlap_tokens, int)
            or not 0 <= overlap_tokens <= (max_tokens - self.overhead) // 2
        ):
            raise ValueError(
                f"overlap_tokens must be between 0 and half of max_tokens, got {overlap_tokens!r}"
            )
        self.max_tokens = max_tokens
        self.room = max_tokens - self.overhead  # tokens of text a chunk may hold
        self.overlap = overlap_tokens
        self.max_chars = max_tokens * MAX_CHARS_PER_TOKEN
        # Lines and words repeat (blank lines, fence markers, table rules, common words): count each
        # distinct one once, up to a bound so a file of unique lines cannot grow the memo without end.
        self._memo: dict[str, int] = {}

    def cost(self, text: str) -> int:
        """Tokens ``text`` adds to a chunk (net of the per-chunk overhead)."""
        if len(text) > self.max_chars:
            # Too long for any chunk, so it will be cut anyway; tokenizing megabytes would only cost
            # memory (a tokenizer keeps several arrays per token).
            return self.room + 1
        cost = self._memo.get(text)
        if cost is None:
            cost = max(0, int(self.count(text)) - self.overhead) if text.strip() else 0
            if len(self._memo) < _MEMO_ENTRIES:
                self._memo[text] = cost
        return cost

    def line_cost(self, line: str) -> int:
        """Tokens one line adds to a chunk."""
        return self.cost(line)

    def fits(self, text: str) -> bool:
        """Whether ``text`` is a valid chunk: within the token and character limits."""
        return len(text) <= self.max_chars and self.count(text) <= self.max_tokens

    def truncate(self, text: str, room: int) -> str:
        """The longest whole-word prefix of ``text`` costing at most ``room`` tokens (and half the chars)."""
        kept, used, chars = [], 0, 0
        for word in _WORD_RE.findall(text):
            cost = self.cost(word)
            if used + cost > room or chars + len(word) > self.max_chars // 2:
                break
            kept.append(word)
            used += cost
            chars += len(word)
        return "".join(kept).strip()


@dataclass(frozen=True, slots=True)  # one per line of a long section: keep them small
class _Unit:
    """A line, or a fragment of a line too long to fit a chunk: the atom chunks are made of."""

    text: str
    line: int  # 0-based line index in the file
    cost: int
    cut_score: int  # how good a place it is to cut before this unit

    @property
    def blank(self) -> bool:
        return not self.text.strip()


def _units(layout: _Layout, budget: _Budget, start: int, stop: int, limit: int) -> list[_Unit]:
    """Lines ``start:stop`` as units; a line longer than ``limit`` tokens is cut in fragments.

    A prose line (a whole paragraph on one line, as exported abstracts and wrapped-off editors
    write them) becomes one unit per sentence, so a chunk ends at a sentence end rather than at a
    fragment boundary or, worse, before the paragraph (which left a heading-only chunk). A code
    line is cut between words and never chosen as a cut point.
    """
    units = []
    for index in range(start, stop):
        line = layout.lines[index]
        cost = budget.line_cost(line)
        line_score = layout.cut_scores[index]
        if cost <= limit and len(line) <= budget.max_chars // 2:
            units.append(_Unit(line, index, cost, line_score))
            continue
        inner = _CUT_NEVER if line_score == _CUT_NEVER else _CUT_SENTENCE
        sentences = _sentences(line) if inner else [line]
        for number, sentence in enumerate(sentences):
            fragments = _split_line(sentence, limit, budget)
            for position, fragment in enumerate(fragments):
                if position:
                    score = _CUT_WORD if inner else _CUT_NEVER
                else:
                    score = line_score if number == 0 else inner
                units.append(_Unit(fragment, index, budget.cost(fragment), score))
    return units


def _sentences(line: str) -> list[str]:
    """``line`` cut after each sentence end; the pieces keep every character but the spaces between."""
    pieces, start = [], 0
    for match in _SENTENCE_END_RE.finditer(line):
        pieces.append(line[start : match.end()])
        start = match.end()
    pieces.append(line[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def _split_line(line: str, limit: int, budget: _Budget) -> list[str]:
    """Cut one over-long line between words (a word too long alone, between characters)."""
    max_chars = budget.max_chars // 2
    fragments: list[str] = []
    current, used = "", 0
    for match in _WORD_RE.finditer(line):
        word = match.group()
        if len(word) > max_chars or (cost := budget.cost(word)) > limit:
            if current:
                fragments.append(current)
                current, used = "", 0
            fragments.extend(_split_word(word.strip(), limit, budget, max_chars))
            continue
        # Summing per-word costs is exact for whitespace-pretokenized models (WordPiece, BPE with a
        # whitespace split); the chunk's exact count is checked again when it is assembled.
        if current and (used + cost > limit or len(current) + len(word) > max_chars):
            fragments.append(current)
            current, used = word.lstrip(), cost
        else:
            current, used = current + word, used + cost
    if current:
        fragments.append(current)
    return fragments


def _split_word(word: str, limit: int, budget: _Budget, max_chars: int) -> list[str]:
    pieces = []
    rest = word
    while rest:
        # Largest prefix within the limit, by binary search over its length.
        low, high = 1, min(len(rest), max_chars)
        while low < high:
            middle = (low + high + 1) // 2
            if budget.cost(rest[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        pieces.append(rest[:low])
        rest = rest[low:]
    return pieces


def _render(units: Sequence[_Unit], prefix: str = "") -> str:
    body = _trim_blank(list(units))
    text = "\n".join(unit.text for unit in body)
    if prefix:
        return f"{prefix}\n{text}" if text else prefix
    return text


def _trim_blank(units: list[_Unit]) -> list[_Unit]:
    start, stop = 0, len(units)
    while start < stop and units[start].blank:
        start += 1
    while stop > start and units[stop - 1].blank:
        stop -= 1
    return units[start:stop]


def _choose_cut(units: Sequence[_Unit], start: int, end: int, room: int) -> int:
    """Where to end a piece holding ``units[start:end]`` at most: the best boundary in its second half."""
    best, best_score = end, -1
    used = 0
    fallback, fallback_score = end, -1
    for cut in range(start + 1, end + 1):
        used += units[cut - 1].cost
        score = units[cut].cut_score if cut < len(units) else _CUT_BLOCK
        if score >= fallback_score:
            fallback, fallback_score = cut, score
        if used * 2 >= room and score >= best_score:
            best, best_score = cut, score
    if best_score > _CUT_NEVER:
        return best
    if fallback_score > _CUT_NEVER:
        return fallback
    return end  # only one code fence or one line here: cut where the room ends


def _overlap_tail(piece: Sequence[_Unit], budget: _Budget) -> list[_Unit]:
    """The last ``overlap`` tokens of a piece: whole lines if they fit, else the last line's tail words."""
    if budget.overlap <= 0:
        return []
    body = _trim_blank(list(piece))
    tail: list[_Unit] = []
    used = 0
    for unit in reversed(body):
        if used + unit.cost > budget.overlap:
            break
        tail.insert(0, unit)
        used += unit.cost
    if _trim_blank(tail) or not body:
        return _trim_blank(tail)
    last = body[-1]
    words = _WORD_RE.findall(last.text)
    kept: list[str] = []
    used = 0
    for word in reversed(words):
        cost = budget.cost(word)
        if used + cost > budget.overlap:
            break
        kept.insert(0, word)
        used += cost
    text = "".join(kept).strip()
    return [_Unit(text, last.line, used, _CUT_NEVER)] if text else []


def _pieces(units: list[_Unit], budget: _Budget, prefix: str) -> list[list[_Unit]]:
    """Cut ``units`` into pieces that each fit the limits; every piece after the first is meant to be
    rendered after ``prefix`` and starts with the previous piece's overlap tail."""
    prefix_cost = budget.cost(prefix) if prefix else 0
    pieces: list[list[_Unit]] = []
    carry: list[_Unit] = []
    start = 0
    while start < len(units):
        while start < len(units) and units[start].blank:
            start += 1
        if start >= len(units):
            break
        room = budget.room - (prefix_cost if pieces else 0)
        chars_room = budget.max_chars - (len(prefix) + 1 if pieces else 0)
        carry_cost = sum(unit.cost for unit in carry)
        carry_chars = sum(len(unit.text) + 1 for unit in carry)
        if carry_cost + units[start].cost > room or carry_chars + len(units[start].text) >= chars_room:
            carry, carry_cost, carry_chars = [], 0, 0
        space = room - carry_cost
        end, used, chars = start, 0, carry_chars
        while (
            end < len(units)
            and used + units[end].cost <= space
            and chars + len(units[end].text) + 1 <= chars_room
        ):
            used += units[end].cost
            chars += len(units[end].text) + 1
            end += 1
        end = max(end, start + 1)  # a unit never exceeds the room, but never loop on one that does
        cut = len(units) if end == len(units) else _choose_cut(units, start, end, space)
        # The sums above are exact for additive counters; check the real count and shrink if needed.
        while True:
            piece = carry + units[start:cut]
            if budget.fits(_render(piece, prefix if pieces else "")) or (cut - start <= 1 and not carry):
                break
            if carry:
                carry = []
            else:
                cut -= 1
        pieces.append(piece)
        carry = _overlap_tail(units[start:cut], budget)
        start = cut
    return pieces


# --------------------------------------------------------------------------------------------------
# Chunk assembly


class _ChunkBuilder:
    """Walks a laid-out document once and emits its L0, L1 and L2 chunks in document order."""

    def __init__(
        self, layout: _Layout, budget: _Budget, doc_key: str, folders: list[str], title: str
    ) -> None:
        self.layout = layout
        self.budget = budget
        self.doc_key = doc_key
        self.folders = folders
        self.title = title
        self.chunks: list[Chunk] = []

    def build(self, summary: str) -> list[Chunk]:
        layout = self.layout
        first_heading = layout.headings[0].start if layout.headings else len(layout.lines)
        lead_covered = self._document_chunk(summary, first_heading)
        if not lead_covered:
            self._emit_range(layout.body_start, first_heading, title="", anchor="", crumbs=[], prefix="")
        self._section_chunks()
        return self.chunks

    def _breadcrumb(self, headings: list[str]) -> str:
        crumbs: list[str] = []
        for crumb in [*self.folders, self.title, *headings]:
            if crumb and (not crumbs or crumbs[-1] != crumb):  # the H1 that gave the title is said once
                crumbs.append(crumb)
        return _BREADCRUMB_SEP.join(crumbs)

    def _add(
        self, level: int, title: str, anchor: str, crumbs: list[str], text: str, lines: tuple[int, int]
    ) -> None:
        ordinal = len(self.chunks)
        self.chunks.append(
            Chunk(
                id=chunk_id(self.doc_key, ordinal),
                ordinal=ordinal,
                level=level,
                breadcrumb=self._breadcrumb(crumbs),
                section_title=title,
                anchor=anchor,
                text=text,
                token_count=int(self.budget.count(text)),
                start_line=lines[0] + 1,
                end_line=lines[1] + 1,
                text_sha=_sha256(text),
            )
        )

    def _document_chunk(self, summary: str, first_heading: int) -> bool:
        """Add the L0 chunk; True when it holds the whole text before the first heading.

        A document whose text starts with a heading gets a card of its title and summary alone: its
        first section is a chunk of its own, and copying its start into L0 as well made two chunks of
        the same text. Measured by `mem eval` on SciFact (docs/evaluation.md): the title card is the
        best single chunk for meaning search, and BM25 loses nothing by it.
        """
        layout, budget = self.layout, self.budget
        header_room = budget.room // 2
        header = budget.truncate(self.title, header_room)
        if summary:
            summary_text = budget.truncate(summary, header_room - budget.cost(header))
            header = f"{header}\n\n{summary_text}" if summary_text else header
        if _last_non_blank(layout.lines, layout.body_start, first_heading) < layout.body_start:
            self._add(LEVEL_DOCUMENT, self.title, "", [], header, (0, max(layout.body_start - 1, 0)))
            return True
        room = budget.room - budget.cost(header)
        chars_room = budget.max_chars - len(header) - 2
        # Count only as many lines as could fit: the rest of a huge lead is not needed for L0.
        stop, used, chars = layout.body_start, 0, 0
        while stop < first_heading and used <= room and chars <= chars_room:
            used += budget.line_cost(layout.lines[stop])
            chars += len(layout.lines[stop]) + 1
            stop += 1
        if stop < first_heading:
            stop += 1  # one line past the room, so the cut chooser sees the boundary after the last fit
        units = _units(layout, budget, layout.body_start, stop, room)
        taken = self._take_fitting(units, room, chars_room)
        lead_text = _render(taken)
        text = f"{header}\n\n{lead_text}" if lead_text else header
        while taken and not budget.fits(text):  # only for counters that are not additive
            taken = taken[:-1]
            lead_text = _render(taken)
            text = f"{header}\n\n{lead_text}" if lead_text else header
        body = _trim_blank(taken)
        end_line = body[-1].line if body else max(layout.body_start - 1, 0)
        self._add(LEVEL_DOCUMENT, self.title, "", [], text, (0, end_line))
        return stop >= first_heading and not _trim_blank(units[len(taken) :])

    @staticmethod
    def _take_fitting(units: list[_Unit], room: int, chars_room: int) -> list[_Unit]:
        used, chars = 0, 0
        for end, unit in enumerate(units):
            if used + unit.cost > room or chars + len(unit.text) + 1 > chars_room:
                return units[: _choose_cut(units, 0, end, room)] if end > 0 else []
            used += unit.cost
            chars += len(unit.text) + 1
        return units

    def _section_chunks(self) -> None:
        layout = self.layout
        stack: list[_Heading] = []
        pending_start: int | None = None  # first line of headings with no body, folded forward
        sections = [section for section in layout.sections if section.level > 0]
        for heading, section in zip(layout.headings, sections, strict=True):
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            start = heading.start if pending_start is None else pending_start
            if not any(line.strip() for line in layout.lines[heading.end : section.end_line]):
                pending_start = start
                continue
            pending_start = None
            self._emit_section(heading, section, [h.title for h in stack], start)
        if pending_start is not None:  # headings with no body at the very end: keep them findable
            self._emit_section(layout.headings[-1], sections[-1], [h.title for h in stack], pending_start)

    def _emit_section(self, heading: _Heading, section: Section, crumbs: list[str], start: int) -> None:
        prefix = "#" * heading.level + " " + heading.title if heading.title else ""
        prefix = self.budget.truncate(prefix, self.budget.room // 4) if prefix else ""
        self._emit_range(start, section.end_line, section.title, section.anchor, crumbs, prefix)

    def _emit_range(
        self, start: int, stop: int, title: str, anchor: str, crumbs: list[str], prefix: str
    ) -> None:
        """One L1 chunk for lines ``start:stop`` if they fit, else L2 pieces."""
        lines = self.layout.lines
        last = _last_non_blank(lines, start, stop)
        if last < start:
            return
        first = next(index for index in range(start, last + 1) if lines[index].strip())
        whole = "\n".join(lines[first : last + 1])
        if self.budget.fits(whole):
            self._add(LEVEL_SECTION, title, anchor, crumbs, whole, (first, last))
            return
        limit = self.budget.room - (self.budget.cost(prefix) if prefix else 0)
        units = _units(self.layout, self.budget, first, last + 1, limit)
        for number, piece in enumerate(_pieces(units, self.budget, prefix)):
            body = _trim_blank(piece)
            text = _render(body, prefix if number else "")
            self._add(LEVEL_PIECE, title, anchor, crumbs, text, (body[0].line, body[-1].line))
