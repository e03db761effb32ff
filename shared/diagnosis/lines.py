"""Reading log lines with bounded memory, and cleaning one line for the rules.

Lines are split on ``\\n`` only: a bare ``\\r`` is a terminal overwrite (progress bars), not a new
line, so line numbers match what editors, GitHub and Treeherder show.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from shared.noise import ANSI_RE

# Longest line kept; the rest of a longer line is dropped (minified JS, binary blobs) so that one line
# can neither exhaust memory nor make a regex slow.
MAX_LINE_CHARS = 4096
READ_BLOCK_BYTES = 1 << 20

# Prefixes that CI systems put before every line: ``gh run view --log`` columns, ISO timestamps
# (GitHub Actions), time-of-day (mozharness), ``[task <ts>]`` (Taskcluster), uptime stamps, and
# BuildKit's step number with elapsed seconds (``#6 1.902 ``).
# Written so that it never crosses a newline: it also runs over whole blocks (MULTILINE).
_PREFIX = (
    r"(?:[^\t\n]{0,200}\t[^\t\n]{0,200}\t(?=\d{4}-\d\d-\d\d[T ]))?"
    r"(?:(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|\[?\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\]?"
    r"|\[task [^\]\n]{1,60}\]"
    r"|\[[ \t]*\d+\.\d+\]"
    r"|#\d+ \d+\.\d+)[ \t]+)+"
)
_PREFIX_RE = re.compile(_PREFIX)
_BLOCK_PREFIX_RE = re.compile(r"^" + _PREFIX, re.MULTILINE)
# The same without the tab-separated columns, several times faster on blocks that have no tab.
_BLOCK_PREFIX_NO_TAB_RE = re.compile(r"^" + _PREFIX[_PREFIX.index(")?") + 2 :], re.MULTILINE)
# A line that starts like a prefix: a digit or a bracket right after a newline.
_PREFIX_START_RE = re.compile(r"\n[\d\[#]")
# mozharness ``LEVEL - message`` and process prefixes such as ``PID 123 | `` or ``GECKO(123) | ``.
_LEVEL_RE = re.compile(r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+-\s+")
_PROCESS_RE = re.compile(r"(?:PID \d+|[A-Z][A-Za-z]*\(\d+\)) \| ")
# Travis folds and timers are bookkeeping, never content.
_TRAVIS_RE = re.compile(r"travis_(?:fold|time):\S*")


def iter_lines(stream: BinaryIO, *, max_line: int = MAX_LINE_CHARS) -> Iterator[str]:
    """Decode a byte stream as UTF-8 (bad bytes replaced) and yield its lines, each cut to ``max_line``.

    Memory stays bounded by the block size and ``max_line`` whatever the input (a 1 GB line included).
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    partial: list[str] = []
    partial_len = 0
    overflow = False
    while True:
        block = stream.read(READ_BLOCK_BYTES)
        text = decoder.decode(block, final=not block)
        start = 0
        while True:
            end = text.find("\n", start)
            if end < 0:
                break
            if not overflow:
                partial.append(text[start : min(end, start + max_line - partial_len)])
            yield "".join(partial)
            partial, partial_len, overflow = [], 0, False
            start = end + 1
        if not overflow and start < len(text):
            piece = text[start : start + max_line - partial_len]
            partial.append(piece)
            partial_len += len(piece)
            overflow = partial_len >= max_line
        if not block:
            break
    if partial_len:
        yield "".join(partial)


def iter_line_blocks(
    source: Iterable[str] | str, *, max_line: int = MAX_LINE_CHARS, block_lines: int = 2048
) -> Iterator[list[str]]:
    """Lines of a string (split on ``\\n``) or of an iterable of lines, in lists of about ``block_lines``.

    Each line is cut to ``max_line``. A string is split a megabyte at a time, so no second full copy
    of a large log is made; an iterable is consumed lazily.
    """
    if isinstance(source, str):
        start = 0
        while start < len(source):
            end = source.find("\n", start + READ_BLOCK_BYTES)
            end = len(source) if end < 0 else end
            lines = source[start:end].split("\n")
            for i in range(0, len(lines), block_lines):
                yield [line if len(line) <= max_line else line[:max_line] for line in lines[i : i + block_lines]]
            start = end + 1
        return
    block: list[str] = []
    for line in source:
        if line.endswith("\n"):
            line = line[:-1]
        block.append(line if len(line) <= max_line else line[:max_line])
        if len(block) >= block_lines:
            yield block
            block = []
    if block:
        yield block


def visible_text(raw: str) -> str:
    """What a terminal would show: ANSI codes gone, the last non-blank ``\\r`` overwrite kept."""
    if raw.endswith("\r"):
        raw = raw.rstrip("\r")
    if "\x1b" in raw or "\x9b" in raw:
        raw = ANSI_RE.sub("", raw)
    if "\r" in raw:
        segments = [s for s in raw.split("\r") if s.strip()]
        raw = segments[-1] if segments else ""
    if "travis_" in raw:
        raw = _TRAVIS_RE.sub("", raw)
    return raw.rstrip()


def indent_width(line: str) -> int:
    """Columns of leading blank in a log line, a tab near the start counted as four (CI runners mix them)."""
    expanded = line.expandtabs(4) if "\t" in line[:64] else line
    return len(expanded) - len(expanded.lstrip())


def strip_prefixes(block: str) -> str:
    """Every line of ``block`` without its CI timestamp prefix (as :func:`split_line` removes it)."""
    if "\t" in block:
        return _BLOCK_PREFIX_RE.sub("", block)
    if block[:1].isdigit() or block[:1] in ("[", "#") or _PREFIX_START_RE.search(block):
        return _BLOCK_PREFIX_NO_TAB_RE.sub("", block)
    return block


def split_line(raw: str) -> tuple[str, str]:
    """(text, body) of a raw log line.

    ``text``: visible text without CI timestamp prefixes. ``body``: ``text`` without a log-level or
    process prefix too (mozharness ``ERROR - ``, ``PID 12 | ``); the rules read ``body``.
    """
    text = visible_text(raw)
    if text and (text[0].isdigit() or text[0] in "[#" or "\t" in text[:400]):
        match = _PREFIX_RE.match(text)
        if match:
            text = text[match.end() :]
    body = text
    if body and body[0] in "DIWECF":
        match = _LEVEL_RE.match(body)
        if match:
            body = body[match.end() :].lstrip()
    if " | " in body[:40]:
        match = _PROCESS_RE.match(body)
        if match:
            body = body[match.end() :]
    return text, body
