"""Log compressor: keep what explains a failure, drop the noise, fold repeats.

Which lines matter is decided by the diagnosis rule tables (``shared.diagnosis``), the same ones that
pick a failure's signature: error, failure, summary and exit-code lines stay (an indented line is also
matched as if it were not indented: test runners indent their reports); cascade boiler-plate and INFO
chatter stay only right under kept lines. Around the kept lines the compressor keeps the structure a
reader needs (the shapes are in :mod:`shared.optimizer.log_shapes`):

- deeper-indented continuation lines (assertion details, compiler notes) and five lines above;
- the output of a failing test after its header, to the next failure, summary or exit line;
- an exception's whole report: its message and what it printed (an expected/actual dump) up to its
  stack trace, the trace, and the indented paragraph after it (the failing test's source);
- sanitizer reports to their ``ABORTING`` line, a block opened by a banner (``====DIFF====``) right
  above an error to the next banner, stack traces no rule announced, diffs printed by lint checks;
- the output just above a failing exit code, short gaps between kept lines, the last lines of the log.

Everything else (INFO/DEBUG chatter, passing tests, download progress) is dropped and counted.
Consecutive lines that are the same once run-specific values are normalised
(:func:`shared.noise.normalise_text`) fold into one with a count.
"""

from __future__ import annotations

import re
from typing import Literal

from shared.diagnosis.classify import rule_index
from shared.diagnosis.lines import indent_width, split_line, visible_text
from shared.noise import normalise_text
from shared.optimizer.log_shapes import (
    BANNER,
    SANITIZER_END,
    is_banner,
    is_exception_header,
    is_frame,
    is_passing_test,
    is_sanitizer_start,
)
from shared.optimizer.outcome import CannotCompress

CONTINUATION_MAX = 200  # indented lines kept after one kept line (a long stack trace is cut there)
BRIDGE_GAP = 2  # a gap of at most this many lines between two kept lines is kept too (keeps blocks whole)
CONTEXT_BEFORE = 5  # non-blank lines kept above every kept line: what led to it
# Non-blank lines kept above a failing exit-code line: what a failed command printed last is most often
# why it failed, in words no rule knows ("flag provided but not defined", a linter's own message).
EXIT_WINDOW = 40
CASCADE_NEAR = 3  # a cascade line this close below a kept line belongs to its block
SECTION_MIN_WEIGHT = 60  # failure headers this specific open a section (generic "failed" words do not)
# Lines of one failing test's output kept after its header: all of it when the next failure, summary
# or exit line closes it within SECTION_MAX lines (a grid or AST dump can be that long), the first
# SECTION_OPEN_MAX when nothing closes it (the output ran on into something else).
SECTION_MAX = 1000
SECTION_OPEN_MAX = 120
DIFF_MAX = 300  # lines of one diff printed into a log
TAIL_LINES = 10  # the last non-blank lines: exit status, "Finished: FAILURE", the runner's verdict
MAX_LINE_CHARS = 1000  # a kept line longer than this (minified code, base64) is cut with a marker
# An exception header's report: what it printed before its stack trace (an expected/actual dump) is kept
# when the trace starts within this many lines, without a paragraph break first.
REPORT_SCAN = 250
TRACE_GAP = 2  # non-frame lines inside a trace (Python's source lines and carets) before it ends
TRAILER_MAX = 300  # lines of the indented paragraph right after a trace (the failing test's source)

_DIFF_LINE = re.compile(
    r"(?:diff --git |index [0-9a-f]|--- |\+\+\+ |@@ |[-+ \\]|new file mode|deleted file mode|similarity index"
    r"|rename (?:from|to) |old mode|new mode|Binary files )"
)
_QUERY_TERM = re.compile(r"[\w.\-/:]{4,}")


def _is_continuation(line: str, anchor_indent: int) -> bool:
    """A line that belongs to the kept line above it: indented deeper (stack frames, assertion details,
    compiler notes) or trace-shaped. Lines at the anchor's own depth are its siblings, not its details."""
    if not line.strip():
        return False
    if line.startswith(("Caused by", "\tat ", "^", "~")):
        return True
    return indent_width(line) > anchor_indent


def _continuation_end(visible: list[str], index: int) -> int:
    """One past the last line that belongs to the kept line at ``index``: deeper-indented lines, single
    blank lines inside them, and a few sub-headers ("Call Stack (most recent call first):",
    "stack backtrace:") that introduce more deeper-indented lines."""
    total = len(visible)
    depth = indent_width(visible[index])
    headers = 0
    follow = index + 1
    while follow < total and follow - index <= CONTINUATION_MAX:
        line = visible[follow]
        following = _next_non_blank(visible, follow + 1)
        if not _is_continuation(line, depth):
            if not line.strip():
                if following is None or not _is_continuation(visible[following], depth) or following > follow + 2:
                    break
            elif (headers < 3 and line.rstrip().endswith(":") and following is not None
                  and indent_width(visible[following]) > indent_width(line)):
                headers += 1
                depth = indent_width(line)
            else:
                break
        follow += 1
    return follow


def _next_non_blank(visible: list[str], start: int) -> int | None:
    for position in range(start, min(len(visible), start + 3)):
        if visible[position].strip():
            return position
    return None


def _failure_section_end(rules: object, split: list[tuple[str, str]], index: int) -> int:
    """One past the output of the failing test announced at ``index`` (pytest's ``___ test ___``, Jest's
    ``●``, cargo's ``---- t stdout ----``): it runs to the next failure, summary or exit line or the next
    passing test (see :data:`SECTION_MAX`)."""
    total = len(split)
    end = index + 1
    while end < total and end - index <= SECTION_MAX:
        if is_passing_test(split[end][0]):
            return end  # the next test's result: this one's output is over
        found, _ = rules.scan(split[end][0], split[end][1], None)  # type: ignore[attr-defined]
        if found is not None and found.kind in {"failure", "summary", "exit"}:
            return end
        end += 1
    return min(end, index + 1 + SECTION_OPEN_MAX)


def _diff_end(visible: list[str], index: int) -> int:
    """One past a diff printed into the log. An empty context line (one space) is blank once trailing
    space is gone, so a blank line followed by more diff stays inside it."""
    total = len(visible)
    end = index + 1
    while end < total and end - index <= DIFF_MAX and (
        _DIFF_LINE.match(visible[end])
        or (not visible[end] and end + 1 < total and _DIFF_LINE.match(visible[end + 1]) is not None)
    ):
        end += 1
    return end


def _report_end(visible: list[str], index: int) -> int | None:
    """One past the failure report opened by the exception header at ``index``: its message and dump,
    its stack trace and the indented paragraph after the trace. None when no trace follows the header
    within :data:`REPORT_SCAN` lines before a paragraph break (the header's continuation is kept then)."""
    total = len(visible)
    position = index + 1
    limit = min(total, index + 1 + REPORT_SCAN)
    while position < limit and not is_frame(visible[position]):
        if not visible[position].strip():
            following = _next_non_blank(visible, position + 1)
            if following is None or not is_frame(visible[following]):
                return None
        elif is_exception_header(visible[position]):
            return None  # the next report starts: this header had no trace of its own
        position += 1
    if position >= limit:
        return None
    end = position
    misses = 0
    while end < total and misses <= TRACE_GAP:
        line = visible[end]
        if is_frame(line) or line.lstrip().startswith(("Caused by", "Suppressed:", "... ")):
            misses = 0
        elif line.strip():
            misses += 1
        else:
            following = _next_non_blank(visible, end + 1)
            if following is None or not is_frame(visible[following]):
                break
        end += 1
    end -= misses  # the lines that ended the trace are not part of it
    trailer = end + 1 if end < total and not visible[end].strip() else end
    if trailer < total and visible[trailer][:1] in " \t" and visible[trailer].strip():
        # The paragraph runs to a blank line, or past blank lines while its braces are open (a test
        # function printed whole).
        stop = trailer
        depth = 0
        while stop < total and stop - trailer < TRAILER_MAX:
            line = visible[stop]
            if not line.strip() and depth <= 0:
                break
            depth += line.count("{") - line.count("}")
            stop += 1
        end = stop
    return end


def _delimited_end(visible: list[str], index: int, closing: re.Pattern[str], *,
                   unclosed: Literal["paragraph", "none"]) -> int:
    """One past the block that starts at ``index`` and runs to the first line matching ``closing``
    (included), at most :data:`SECTION_MAX` lines. Without a closing line the block ends at the first
    blank line (``unclosed="paragraph"``) or is just its first line (``"none"``)."""
    limit = min(len(visible), index + 1 + SECTION_MAX)
    for position in range(index + 1, limit):
        if closing.match(visible[position]):
            return position + 1
    if unclosed == "none":
        return index + 1
    position = index + 1
    while position < limit and visible[position].strip():
        position += 1
    return position


def _opening_banners(visible: list[str]) -> set[int]:
    """Positions of the banners that open a block: banners pair up in order (``DIFF`` opens, ``DONE``
    closes), and a banner more than :data:`SECTION_MAX` lines after the one before starts a new pair."""
    openers: set[int] = set()
    previous: int | None = None
    for position, line in enumerate(visible):
        if line[:1] not in "=*#~+- \t" or not is_banner(line):
            continue
        if previous is None or previous not in openers or position - previous > SECTION_MAX:
            openers.add(position)
        previous = position
    return openers


def _previous_non_blank(visible: list[str], index: int) -> int | None:
    for position in range(index - 1, max(-1, index - 3), -1):
        if visible[position].strip():
            return position
    return None


def _keep_before(visible: list[str], keep: bytearray, index: int, count: int) -> None:
    """Keep up to ``count`` non-blank lines above ``index`` (stopping at a line already kept). Passing
    tests are stepped over, not kept: they say nothing about the failure below them."""
    seen = 0
    position = index - 1
    lowest = max(-1, index - 1 - 4 * count)  # bounded: a thousand passing tests are not walked through
    while position > lowest and seen < count and not keep[position]:
        line = visible[position]
        if line.strip() and not is_passing_test(line):
            keep[position] = 1
            seen += 1
        position -= 1


def _with_indent(raw: str, text: str) -> str:
    """``text`` with the indentation the CI prefix removal swallowed (the prefix's own separator is one space)."""
    if not text or raw.startswith(text) or text[0] in " \t":
        return text
    shown = visible_text(raw)
    if not shown.endswith(text):
        return text
    prefix = shown[: len(shown) - len(text)]
    indent = prefix[len(prefix.rstrip()) + 1 :]
    return indent + text


def _blank_if_only_noise(line: str) -> str:
    """A line that is nothing but a timestamp (a blank line with its CI prefix) is blank."""
    if (line and len(line) <= 40 and (line[0].isdigit() or line[0] == "[")
            and not normalise_text(line).replace("<ts>", "").strip(" []")):
        return ""
    return line


_DIGITS = str.maketrans("", "", "0123456789")


class _FoldKey:
    """The line a run of repeats started with; its normalised form is computed once, when first needed."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.digitless = line.translate(_DIGITS)
        self._normalised: str | None = None

    @property
    def normalised(self) -> str:
        if self._normalised is None:
            self._normalised = normalise_text(self.line)
        return self._normalised

    def same_as(self, line: str) -> bool:
        """True when ``line`` differs from this one only in run-specific values. The digit-free
        comparison is a cheap pre-check (timestamps, counters, durations are digits); the noise
        patterns decide."""
        if line == self.line:
            return True
        if len(line) > 500 or line.translate(_DIGITS) != self.digitless:
            return False  # long lines are compared exactly: normalising them costs more than folding saves
        return normalise_text(line) == self.normalised


def _dropped_marker(count: int) -> str:
    return f"… {count} line{'s' if count != 1 else ''}"


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}…[+{len(line) - MAX_LINE_CHARS} chars]"


def compress_log(text: str, *, query: str | None = None) -> str:
    """Return the lines of ``text`` that explain a failure, with counts where lines were dropped."""
    raw_lines = text.rstrip("\n").split("\n")
    if len(raw_lines) < 4:
        raise CannotCompress("too_short", "a log of fewer than four lines is kept whole")
    # split_line gives what a terminal shows without the CI's per-line timestamp prefix (``text``) and,
    # for the rules, without the log-level prefix too (``body``). Output uses ``text``: a timestamp on
    # every line is bookkeeping, and the CCR original still has them.
    split = [split_line(line) for line in raw_lines]
    visible = [_blank_if_only_noise(_with_indent(raw, text_)) for raw, (text_, _) in zip(raw_lines, split, strict=True)]
    total = len(visible)
    keep = bytearray(total)
    terms = tuple({t.lower() for t in _QUERY_TERM.findall(query)}) if query else ()
    rules = rule_index("auto")

    anchors = 0
    opening_banners = _opening_banners(visible)
    index = 0
    while index < total:
        found, _ = rules.scan(split[index][0], split[index][1], None)
        if found is None and split[index][0][:1] in " \t":
            # Test runners indent their reports; the rules' anchored patterns (``^ValueError: x``,
            # ``^x.js:3:1: msg``) see the line as it would be printed on its own.
            found, _ = rules.scan(split[index][0].lstrip(), split[index][1].lstrip(), None)
        line_matches_query = bool(terms) and any(t in visible[index].lower() for t in terms)
        if found is not None and found.kind == "cascade" and not line_matches_query:
            # Boiler-plate and INFO chatter by the rules' own verdict; kept only right after kept lines,
            # where it is the tail of an error block ("[ERROR] -> [Help 1]", "Re-run Maven using -X").
            if any(keep[max(0, index - CASCADE_NEAR) : index]):
                keep[index] = 1
            index += 1
            continue
        if found is not None or line_matches_query:
            anchors += 1
            banner = _previous_non_blank(visible, index)
            opening_banner = banner is not None and banner in opening_banners
            keep[index] = 1
            _keep_before(visible, keep, index, CONTEXT_BEFORE)
            if found is not None and found.kind == "exit":
                _keep_before(visible, keep, index, EXIT_WINDOW)
            if found is not None and found.kind == "failure" and found.weight >= SECTION_MIN_WEIGHT:
                end = _failure_section_end(rules, split, index)
            else:
                end = _continuation_end(visible, index)
            if is_exception_header(visible[index]):
                end = max(end, _report_end(visible, index) or end)
            if is_sanitizer_start(visible[index]):
                end = max(end, _delimited_end(visible, index, SANITIZER_END, unclosed="paragraph"))
            if opening_banner:
                # A banner right above the first error opens a block of its own (run-tests.php's
                # "========DIFF========" .. "========DONE========"): the block is the report.
                end = max(end, _delimited_end(visible, index, BANNER, unclosed="none"))
            for position in range(index + 1, end):
                keep[position] = 1
            index += 1  # lines inside the block are scanned too: a block can hold the next report
            continue
        if is_frame(visible[index]):
            # A stack trace no rule announced (an "Also:" or "Expected:" header, a warning's trace):
            # keep the frames and the line that heads them.
            keep[index] = 1
            _keep_before(visible, keep, index, 1)
        elif visible[index].startswith("diff --git "):
            # A diff printed by a formatting or lint check is what the check complains about.
            end = _diff_end(visible, index)
            for position in range(index, end):
                keep[position] = 1
            index = end
            continue
        index += 1

    tail_seen = 0
    for position in range(total - 1, -1, -1):
        if visible[position].strip():
            keep[position] = 1
            tail_seen += 1
            if tail_seen >= TAIL_LINES:
                break

    # Bridge short gaps so that a block with one unmatched line in the middle stays a block.
    last_kept = -1
    for position in range(total):
        if keep[position]:
            if 0 <= last_kept < position - 1 and position - last_kept - 1 <= BRIDGE_GAP:
                for gap in range(last_kept + 1, position):
                    keep[gap] = 1
            last_kept = position

    out: list[str] = []
    dropped = 0
    previous_key: _FoldKey | None = None
    repeats = 0

    def close_repeats() -> None:
        nonlocal repeats
        if repeats:
            out[-1] = f"{out[-1]} [×{repeats + 1}]"
            repeats = 0

    for position in range(total):
        line = visible[position]
        if not keep[position]:
            dropped += 1
            continue
        if not line.strip() and dropped == 0 and out and not out[-1].strip():
            continue  # one blank line is enough
        if dropped:
            close_repeats()
            out.append(_dropped_marker(dropped))
            dropped = 0
            previous_key = None
        if line.strip() and previous_key is not None and previous_key.same_as(line):
            repeats += 1
            continue
        close_repeats()
        previous_key = _FoldKey(line) if line.strip() else None
        out.append(_cut(line))
    close_repeats()
    if dropped:
        out.append(_dropped_marker(dropped))
    if anchors == 0:
        out.insert(0, "[no error lines found]")
    return "\n".join(out)
