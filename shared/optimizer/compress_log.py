"""Log compressor: keep what explains a failure, drop the noise, fold repeats.

Which lines matter is decided by the diagnosis rule tables (``shared.diagnosis``), the same ones that
pick a failure's signature: error, failure, summary and exit-code lines stay; cascade boiler-plate and
INFO chatter stay only right under kept lines. Around the kept lines the compressor keeps the structure
a reader needs: deeper-indented continuation lines (stack frames, assertion details, compiler notes),
the output of a failing test after its header, a few lines of context above, the output just above a
failing exit code, stack traces no rule announced, diffs printed by lint checks, short gaps between
kept lines and the last lines of the log. Everything else (INFO/DEBUG chatter, passing tests, download
progress) is dropped and counted. Consecutive lines that are the same once run-specific values are
normalised (:func:`shared.noise.normalise_text`) fold into one with a count.
"""

from __future__ import annotations

import re

from shared.diagnosis.classify import rule_index
from shared.diagnosis.lines import split_line, visible_text
from shared.noise import normalise_text
from shared.optimizer.outcome import CannotCompress

CONTINUATION_MAX = 200  # indented lines kept after one kept line (a long stack trace is cut there)
BRIDGE_GAP = 1  # a gap of at most this many lines between two kept lines is kept too (keeps blocks whole)
CONTEXT_BEFORE = 3  # non-blank lines kept above every kept line: what led to it
# Non-blank lines kept above a failing exit-code line: what a failed command printed last is most often
# why it failed, in words no rule knows ("flag provided but not defined", a linter's own message).
EXIT_WINDOW = 40
CASCADE_NEAR = 3  # a cascade line this close below a kept line belongs to its block
SECTION_MIN_WEIGHT = 60  # failure headers this specific open a section (generic "failed" words do not)
SECTION_MAX = 120  # lines of one failing test's output kept after its header
DIFF_MAX = 300  # lines of one diff printed into a log
TAIL_LINES = 3  # the last non-blank lines: exit status, "Finished: FAILURE", the runner's verdict
MAX_LINE_CHARS = 1000  # a kept line longer than this (minified code, base64) is cut with a marker

_NATIVE_FRAME = re.compile(r"#\d+ +0x[0-9a-fA-F]+ in ")  # gdb, AddressSanitizer, backtrace(3)
_SANITIZER = re.compile(r"(?:= )?==\d+==")  # AddressSanitizer and friends prefix every report line
_DIFF_LINE = re.compile(
    r"(?:diff --git |index [0-9a-f]|--- |\+\+\+ |@@ |[-+ \\]|new file mode|deleted file mode|similarity index"
    r"|rename (?:from|to) |old mode|new mode|Binary files )"
)
_QUERY_TERM = re.compile(r"[\w.\-/:]{4,}")


def _indent(line: str) -> int:
    expanded = line.expandtabs(4) if "\t" in line[:64] else line
    return len(expanded) - len(expanded.lstrip())


def _is_continuation(line: str, anchor_indent: int) -> bool:
    """A line that belongs to the kept line above it: indented deeper (stack frames, assertion details,
    compiler notes) or trace-shaped. Lines at the anchor's own depth are its siblings, not its details."""
    if not line.strip():
        return False
    if line.startswith(("Caused by", "\tat ", "^", "~")):
        return True
    return _indent(line) > anchor_indent


def _is_frame(line: str) -> bool:
    """A stack frame: Java/JS ``at x.y(File.java:12)``, Python ``File "x.py", line 3``, Go ``\tpath.go:12``."""
    stripped = line.strip()
    if _NATIVE_FRAME.search(stripped[:24]) is not None or _SANITIZER.match(stripped) is not None:
        return True
    return line[:1].isspace() and (
        (stripped.startswith("at ") and stripped.endswith(")"))
        or (stripped.startswith('File "') and '", line ' in stripped)
    )


def _continuation_end(visible: list[str], index: int) -> int:
    """One past the last line that belongs to the kept line at ``index``: deeper-indented lines, single
    blank lines inside them, and a few sub-headers ("Call Stack (most recent call first):",
    "stack backtrace:") that introduce more deeper-indented lines."""
    total = len(visible)
    depth = _indent(visible[index])
    headers = 0
    follow = index + 1
    while follow < total and follow - index <= CONTINUATION_MAX:
        line = visible[follow]
        following = _next_non_blank(visible, follow + 1)
        if _is_continuation(line, depth):
            pass
        elif not line.strip():
            if following is None or not _is_continuation(visible[following], depth) or following > follow + 2:
                break
        elif (headers < 3 and line.rstrip().endswith(":") and following is not None
              and _indent(visible[following]) > _indent(line)):
            headers += 1
            depth = _indent(line)
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
    ``●``, cargo's ``---- t stdout ----``): it runs to the next failure or summary line, bounded."""
    total = len(split)
    end = index + 1
    while end < total and end - index <= SECTION_MAX:
        found, _ = rules.scan(split[end][0], split[end][1], None)  # type: ignore[attr-defined]
        if found is not None and found.kind in {"failure", "summary", "exit"}:
            break
        end += 1
    return end


def _diff_end(visible: list[str], index: int) -> int:
    end = index + 1
    while end < len(visible) and end - index <= DIFF_MAX and _DIFF_LINE.match(visible[end]):
        end += 1
    return end


def _keep_before(visible: list[str], keep: bytearray, index: int, count: int) -> None:
    """Keep up to ``count`` non-blank lines above ``index`` (stopping at a line already kept)."""
    seen = 0
    position = index - 1
    while position >= 0 and seen < count and not keep[position]:
        if visible[position].strip():
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
    index = 0
    while index < total:
        found, _ = rules.scan(split[index][0], split[index][1], None)
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
            keep[index] = 1
            _keep_before(visible, keep, index, CONTEXT_BEFORE)
            if found is not None and found.kind == "exit":
                _keep_before(visible, keep, index, EXIT_WINDOW)
            if found is not None and found.kind == "failure" and found.weight >= SECTION_MIN_WEIGHT:
                end = _failure_section_end(rules, split, index)
            else:
                end = _continuation_end(visible, index)
            for position in range(index + 1, end):
                keep[position] = 1
            index = max(end, index + 1)
            continue
        if _is_frame(visible[index]):
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
