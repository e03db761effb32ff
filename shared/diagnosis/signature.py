"""Failure signatures: the one line of a CI log that explains the failure, normalised and hashed.

:func:`extract_signature` streams the log once, keeps a few lines of context and a capped list of
error lines, so memory stays bounded whatever the log's size.

How the line is chosen (root cause over consequence):

1. every line is classified by the tool rule tables (:mod:`shared.diagnosis.rules`); cascade and
   exit-code lines never become the signature, nor do the command lines that start a CI step;
2. each candidate scores its rule's weight, plus a bonus when it sits in the first CI step that
   ended with a failing exit code (Travis ``The command "x" exited with 1``, GitHub Actions
   ``Process completed with exit code 1``); a failed step with no error-looking line offers its last
   output line instead ("Bundle is 12 kB over its budget");
3. header rules ("rake aborted!", "* What went wrong:") hand their weight to the next line;
4. the highest score wins, and among equals the earliest line; when the winner repeats an earlier
   line (same text but for numbers), the earlier one is reported: the first error explains the rest.

A log whose best line is only weak evidence (the bare word "error") and that shows no failing exit
code has no signature: ``found`` is False.

Line numbers count ``\n`` only (a lone ``\r`` is a terminal overwrite, as in progress bars).
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from itertools import accumulate

from shared.diagnosis.classify import LineClass, RuleIndex, resolve_tool, rule_index
from shared.diagnosis.lines import indent_width, iter_line_blocks, split_line, strip_prefixes, visible_text
from shared.diagnosis.rules import CANDIDATE_KINDS
from shared.noise import normalise_text, strip_ansi

CONTEXT_BEFORE = 2
CONTEXT_AFTER = 3
DEFAULT_MAX_ERRORS = 50
# Candidates below this weight are weak evidence (see the module docstring).
WEAK_WEIGHT = 30
# Error lines listed in ``errors`` need at least this weight.
ERROR_LIST_WEIGHT = 50
FAILED_STEP_BONUS = 25
# A CI step that reported success (Travis ``The command "x" exited with 0.``) was survived: its lines
# did not fail the job ("fatal: not a git repository" before ``|| git clone``), so they lose this much.
SURVIVED_STEP_PENALTY = 30
# A failed step with no error-looking line: its last output line, as weak evidence.
LAST_OUTPUT_RULE = "generic.last_output"
LAST_OUTPUT_WEIGHT = 30
# Distinct error lines remembered for "first occurrence" (bounded: memory must not grow with the log).
MAX_FIRST_SEEN = 512
MAX_NORMALISED_CHARS = 1000
# Classified line texts remembered (bounded cache).
MAX_SEEN_LINES = 4096
# Hint-free lines remembered to find a failed step's last output.
QUIET_LINES = 32
# Lines per bulk hint search: large enough to amortise the per-block cost, small enough to bound memory.
BLOCK_LINES = 2048

_STEP_START_RE = re.compile(r"^(?:\$ \S|##\[group\]Run )")
_SPACES_RE = re.compile(r"\s+")
_DIGITS_RE = re.compile(r"\d+")
_WORD_RE = re.compile(r"\w")


@dataclass(frozen=True)
class ErrorLine:
    """One error line of the log: its 1-based number, cleaned text and the rule that matched."""

    line: int
    text: str
    rule: str


@dataclass(frozen=True)
class Signature:
    """The failure signature of one log (``found`` False: no recognisable error, no signature)."""

    found: bool
    tool: str
    raw: str | None = None
    normalised: str | None = None
    sig_sha: str | None = None
    rule: str | None = None
    confidence: float = 0.0
    matched_line: int | None = None
    context: tuple[str, ...] = ()
    errors: tuple[ErrorLine, ...] = ()
    lines_read: int = 0

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (lists instead of tuples)."""
        data = asdict(self)
        data["context"] = list(self.context)
        data["errors"] = [asdict(e) for e in self.errors]
        return data


@dataclass
class _Candidate:
    line_no: int
    raw: str
    body: str
    cls: LineClass
    score: int
    marker_tool: str | None
    before: list[str]
    after: list[str] = field(default_factory=list)
    first: _Candidate | None = None


def signature_text(body: str) -> str:
    """The normalised form hashed into ``sig_sha``: run noise replaced, spaces collapsed, capped."""
    return _SPACES_RE.sub(" ", normalise_text(body)).strip()[:MAX_NORMALISED_CHARS]


def sig_sha(tool: str, normalised: str) -> str:
    """sha256 hex of ``tool + "\\n" + normalised``."""
    return hashlib.sha256(f"{tool}\n{normalised}".encode()).hexdigest()


def _better(a: _Candidate | None, b: _Candidate | None) -> _Candidate | None:
    """The higher score; the earlier line on a tie."""
    if a is None:
        return b
    if b is None:
        return a
    if b.score > a.score or (b.score == a.score and b.line_no < a.line_no):
        return b
    return a


def extract_signature(
    lines: Iterable[str] | str,
    tool: str = "auto",
    *,
    max_errors: int = DEFAULT_MAX_ERRORS,
) -> Signature:
    """Find the line that explains the failure in a CI log and hash its normalised form.

    ``lines``: the log as one string or any iterable of lines (read once, lazily). ``tool``: a name
    from :data:`KNOWN_TOOLS`, an alias, or "auto" (raises :class:`UnknownToolError` otherwise).
    """
    scan = _Scan(resolve_tool(tool), max_errors)
    for block in iter_line_blocks(lines, block_lines=BLOCK_LINES):
        scan.feed(block)
    return scan.result()


class _Scan:
    """The state of one pass over a log (bounded: a few candidates, capped error lists)."""

    def __init__(self, named: str, max_errors: int) -> None:
        self.named = named
        self.index = rule_index(named)
        self.max_errors = max_errors
        self.active: set[str] = set()
        self.last_marker: str | None = None
        self.before: deque[str] = deque(maxlen=CONTEXT_BEFORE)
        # The last lines with their numbers, for the context of a step's last output line.
        self.recent: deque[tuple[int, str]] = deque(maxlen=CONTEXT_BEFORE + CONTEXT_AFTER + 2)
        self.open: list[_Candidate] = []
        # The best line of the current step, and of the steps before it (survived ones penalised).
        self.step_best: _Candidate | None = None
        self.step_failed = False
        self.step_last: tuple[int, str] | None = None
        self.failed_best: _Candidate | None = None
        self.overall_best: _Candidate | None = None
        self.failing_exit_seen = False
        self.errors: list[ErrorLine] = []
        self.first_seen: dict[str, _Candidate] = {}
        self.seen_lines: dict[str, tuple[LineClass | None, str | None]] = {}
        self.marker_counts: dict[str, int] = {}
        # The last lines without any hint since the last classified line; the newest with visible
        # content is a failed step's last output (checked only when a step fails: cheap per line).
        self.quiet: deque[tuple[int, str]] = deque(maxlen=QUIET_LINES)
        # A header line ("rake aborted!") waiting for the next non-blank line, which explains it.
        self.header: LineClass | None = None
        self.line_no = 0

    def feed(self, block: list[str]) -> None:
        """Scan the next block of lines; only lines containing a hint get the per-line work."""
        hits = _hit_lines(self.index, block)
        for position, raw in enumerate(block):
            self.line_no += 1
            if self.open:
                for cand in self.open:
                    cand.after.append(raw)
                self.open = [c for c in self.open if len(c.after) < CONTEXT_AFTER]
            if position in hits:
                self._line(raw)
            elif raw:
                self.quiet.append((self.line_no, raw))
                if self.header is not None and _has_content(raw):
                    self._candidate(raw, split_line(raw)[1], self.header)
                    self.header = None
            self.before.append(raw)
            self.recent.append((self.line_no, raw))

    def _line(self, raw: str) -> None:
        text, body = split_line(raw)
        if not body.strip():
            return
        # Logs repeat lines (warnings, retries, progress): classify each distinct text once while the
        # set of tools seen stays the same (needs_marker rules depend on it).
        cached = self.seen_lines.get(text)
        if cached is None:
            cached = self.index.scan(text, body, self.active)
            if len(self.seen_lines) >= MAX_SEEN_LINES:
                self.seen_lines.clear()
            self.seen_lines[text] = cached
        cls, marker = cached
        if marker is not None and marker not in self.active:
            self.seen_lines.clear()
        if marker is not None:
            self.active.add(marker)
            self.last_marker = marker
            self.marker_counts[marker] = self.marker_counts.get(marker, 0) + 1
        if _STEP_START_RE.match(body):
            # A CI step starts: its command line ("$ make test") is never an error line itself.
            self._close_step(survived=False)
            self.step_last = None
            self.quiet.clear()
            return
        if cls is None:
            self._set_last(raw)
            if self.header is not None:
                self._candidate(raw, body, self.header)
                self.header = None
        elif cls.kind == "exit":
            # A header followed by an exit line ("rake aborted!" then "Command failed with status (1)")
            # points at nothing new: the error is above it.
            self.header = None
            self._exit(cls)
        elif cls.step_ok:
            self._close_step(survived=True)
        elif cls.kind in CANDIDATE_KINDS:
            self._set_last(raw)
            if self.header is not None:
                self._candidate(raw, body, self.header if self.header.weight > cls.weight else cls)
                self.header = None
            elif cls.points_next:
                self.header = cls
            else:
                self._candidate(raw, body, cls)

    def _set_last(self, raw: str) -> None:
        self.step_last = (self.line_no, raw)
        self.quiet.clear()

    def _last_output(self) -> tuple[int, str] | None:
        """The step's last line with visible content (quiet lines after the last classified one first)."""
        for line_no, raw in reversed(self.quiet):
            if _has_content(raw):
                return line_no, raw
        return self.step_last

    def _close_step(self, *, survived: bool) -> None:
        """Fold the current step's best line into the overall best; a survived step's loses weight."""
        best = self.step_best
        if best is not None:
            if survived and not self.step_failed and best is not self.failed_best:
                best.score -= SURVIVED_STEP_PENALTY
            self.overall_best = _better(self.overall_best, best)
        self.step_best = None
        self.step_failed = False

    def _exit(self, cls: LineClass) -> None:
        self.failing_exit_seen = True
        self.step_failed = True
        if cls.weight < 100 or self.failed_best is not None:
            return
        best = self.step_best
        last = self._last_output()
        if (best is None or best.cls.weight < WEAK_WEIGHT) and last is not None:
            # Nothing in the failed step looks like an error: its last output line is the best guess
            # ("No Rakefile found", "Bundle is 12 kB over its budget").
            best = self._last_output_candidate(*last)
        if best is not None:
            best.score += FAILED_STEP_BONUS
            self.failed_best = best

    def _last_output_candidate(self, line_no: int, raw: str) -> _Candidate:
        before = [r for n, r in self.recent if line_no - CONTEXT_BEFORE <= n < line_no]
        after = [r for n, r in self.recent if line_no < n <= line_no + CONTEXT_AFTER]
        body = split_line(raw)[1]
        cls = LineClass("generic", LAST_OUTPUT_RULE, "error", LAST_OUTPUT_WEIGHT)
        cand = _Candidate(line_no, raw, body, cls, cls.weight, self.last_marker, before, after)
        if len(cand.after) < CONTEXT_AFTER:
            self.open.append(cand)
        return cand

    def _candidate(self, raw: str, body: str, cls: LineClass) -> None:
        listed = cls.weight >= ERROR_LIST_WEIGHT and len(self.errors) <= self.max_errors
        if not listed and self.step_best is not None and self.step_best.score >= cls.weight:
            # Cannot win: a later line of the same step loses ties, and whatever the step's end adds or
            # takes (failed-step bonus, survived-step penalty) goes to its best line. Not listed either.
            return
        key = _dedupe_key(body)
        cand = _Candidate(self.line_no, raw, body, cls, cls.weight, self.last_marker, list(self.before))
        # A repeated error (the same step re-run, a traceback printed twice) keeps its first
        # occurrence as the line to show: the first error explains the rest.
        cand.first = self.first_seen.get(key)
        if cand.first is None and len(self.first_seen) < MAX_FIRST_SEEN:
            self.first_seen[key] = cand
            self.open.append(cand)
        if cls.weight >= ERROR_LIST_WEIGHT and len(self.errors) <= self.max_errors:
            self.errors.append(ErrorLine(self.line_no, _shown(raw), cls.rule))
        self.step_best = _better(self.step_best, cand)
        if self.step_best is cand and cand not in self.open:
            self.open.append(cand)

    def result(self) -> Signature:
        """The signature of everything fed so far."""
        # The last step may be cut off (no exit line yet): it is not penalised.
        chosen = _better(_better(self.overall_best, self.step_best), self.failed_best)
        best = chosen.first if chosen is not None and chosen.first is not None else chosen
        fallback_tool = self.named if self.named != "auto" else _most_marked(self.marker_counts)
        if chosen is None or best is None or (chosen.cls.weight < WEAK_WEIGHT and not self.failing_exit_seen):
            return Signature(
                found=False, tool=fallback_tool, errors=tuple(self.errors[: self.max_errors]), lines_read=self.line_no
            )
        if self.named != "auto":
            sig_tool = self.named
        elif best.cls.tool != "generic":
            sig_tool = best.cls.tool
        else:
            sig_tool = best.marker_tool or fallback_tool
        body = best.body
        line_no, raw = best.line_no, best.raw
        if best.cls.with_next:
            # The message is on the next line ("src/X.hs:3:1: error:" then "Variable not in scope: f"); a
            # table's rule line (" ------ ") between them says nothing.
            following = next((split_line(r)[1] for r in best.after if _WORD_RE.search(visible_text(r))), "")
            body = f"{body} {following}"
        elif best.cls.block_below:
            # A failure header whose indented block below says why (TAP's ``not ok 6 - x`` then its
            # YAML diagnostics): the block's first line is shown, the signature reads both.
            detail = _detail_line(best.raw, best.after)
            if detail is not None:
                line_no, raw = best.line_no + detail, best.after[detail - 1]
                body = f"{body} {split_line(raw)[1].strip()}"
        normalised = signature_text(body)
        others = tuple(e for e in self.errors if e.line != best.line_no)[: self.max_errors]
        return Signature(
            found=True,
            tool=sig_tool,
            raw=raw,
            normalised=normalised,
            sig_sha=sig_sha(sig_tool, normalised),
            rule=best.cls.rule,
            confidence=round(min(1.0, chosen.score / 100), 2),
            matched_line=line_no,
            context=tuple(_shown(line) for line in (*best.before, best.raw, *best.after)),
            errors=others,
            lines_read=self.line_no,
        )


def _has_content(raw: str) -> bool:
    """True when the line shows something (not blank, not only colour codes or Travis bookkeeping)."""
    if not raw or raw.isspace():
        return False
    if "\x1b" in raw or "\r" in raw or "travis_" in raw:
        return bool(visible_text(raw).strip())
    return True


def _detail_line(header: str, after: list[str]) -> int | None:
    """Offset (1-based) of the first line with a word in the indented block right below ``header``.

    Blank lines and rules (``  ---``, ``-----``) inside the block are skipped; a line indented no
    deeper than the header ends it (the next test's result line).
    """
    depth = indent_width(visible_text(header))
    for offset, raw in enumerate(after, 1):
        text = visible_text(raw)
        if not text.strip():
            continue
        if indent_width(text) <= depth:
            return None
        if _WORD_RE.search(text):
            return offset
    return None


def _dedupe_key(body: str) -> str:
    """Cheap stand-in for the normalised text: repeated error lines differ in numbers, if at all."""
    return _DIGITS_RE.sub("0", _SPACES_RE.sub(" ", body.strip()))


def _shown(raw: str) -> str:
    """A line as a person should read it: visible text without CI timestamp prefixes."""
    return split_line(raw)[0].strip()


def _hit_lines(index: RuleIndex, block: list[str]) -> set[int]:
    """Positions of the block's lines that contain any rule, marker or step hint.

    One ``lower()`` and one Aho-Corasick pass per block instead of per line: most lines contain no
    hint and never reach the per-line (Python) work. ANSI codes and CI timestamp prefixes go first,
    as :func:`split_line` would remove them (colour codes can split a hint: ``npm\\x1b[0m ERR!``).
    """
    joined = "\n".join(block)
    if "\x1b" in joined or "\x9b" in joined:
        joined = strip_ansi(joined)
    joined = strip_prefixes(joined)
    # Offsets of each line's first character in "\n" + joined + "\n".
    starts = list(accumulate((len(piece) + 1 for piece in joined.split("\n")), initial=1))
    return index.hit_lines(f"\n{joined.lower()}\n", starts)


def _most_marked(counts: dict[str, int]) -> str:
    if not counts:
        return "generic"
    # Most marker lines wins; ties go to the alphabetically first name so the result never depends on order.
    return min(counts, key=lambda t: (-counts[t], t))


def detect_tool(lines: Iterable[str] | str) -> str:
    """The tool ``extract_signature(lines)`` would report for this log ("generic" when unknown)."""
    return extract_signature(lines, "auto", max_errors=0).tool
