"""Matching one log line against the rule tables, fast.

The tables hold about two hundred regexes; trying each on every line would cost milliseconds per
hundred lines, and one big alternation is no better in Python's ``re``. Instead every rule and marker
names lower-case hint substrings it cannot match without, one Aho-Corasick automaton finds every hint
of a line in a single pass (pyahocorasick, C), and only the rules whose hints are present are tried,
heaviest first. Most log lines contain no hint at all and cost one automaton pass.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

import ahocorasick

from shared.diagnosis.lines import split_line
from shared.diagnosis.rules import KNOWN_TOOLS, TOOL_ALIASES, TOOL_TABLES, Rule

# A tool named explicitly (``--tool npm``) makes its own rules this much heavier.
NAMED_TOOL_BONUS = 10
# Lines that start a CI step (Travis and GitLab echo ``$ cmd``, GitHub Actions ``##[group]Run cmd``)
# must reach the extractor too, though no rule matches them.
STEP_HINTS: tuple[str, ...] = ("$ ", "##[group]run ")


def hint_keys(hint: str) -> list[str]:
    """The automaton keys of one hint: ``^x`` means x at the start of a line, ``x$`` at its end.

    Lines are searched as ``"\\n" + text + "\\n"``, so a line start is a ``\\n`` (or the ``\\r`` of a
    terminal overwrite) before the hint and a line end a ``\\n`` after it.
    """
    keys = [hint]
    if len(hint) > 1 and hint.endswith("$"):
        keys = [hint[:-1] + "\n"]
    if len(hint) > 1 and hint.startswith("^"):
        keys = [p + k[1:] for k in keys for p in ("\n", "\r")]
    return keys


class UnknownToolError(ValueError):
    """The tool name is not one of :data:`KNOWN_TOOLS` (or an alias)."""


@dataclass(frozen=True)
class LineClass:
    """How a line was classified: the rule that matched and the tool table it belongs to."""

    tool: str
    rule: str
    kind: str
    weight: int
    points_next: bool = False
    step_ok: bool = False
    with_next: bool = False
    block_below: bool = False


def resolve_tool(tool: str) -> str:
    """The canonical table name for ``tool`` ("auto" stays "auto"); :class:`UnknownToolError` if unknown."""
    name = (tool or "auto").strip().lower()
    name = TOOL_ALIASES.get(name, name)
    if name != "auto" and name not in KNOWN_TOOLS:
        known = ", ".join(("auto", *KNOWN_TOOLS))
        raise UnknownToolError(f"unknown tool {tool!r}; known tools: {known}")
    return name


def _top_level_alternatives(pattern: str) -> list[str]:
    """Split a regex at its top-level ``|`` (outside groups and character classes)."""
    parts, depth, in_class, escaped, start = [], 0, False, False, 0
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
    parts.append(pattern[start:])
    return parts


def is_anchored(pattern: re.Pattern[str]) -> bool:
    """True when every top-level alternative starts with ``^`` (so ``match`` is enough)."""
    source = pattern.pattern
    if source.startswith("(?i)"):
        source = source[4:]
    return all(alt.startswith("^") for alt in _top_level_alternatives(source))


@dataclass(frozen=True)
class _Entry:
    tool: str
    rule: Rule
    weight: int
    matcher: object  # the bound ``match`` or ``search`` of the rule's pattern


class RuleIndex:
    """All rules and markers, compiled for one named tool (or "auto"): see the module docstring."""

    def __init__(self, named_tool: str) -> None:
        self.named_tool = named_tool
        entries: list[_Entry] = []
        for table in TOOL_TABLES:
            bonus = NAMED_TOOL_BONUS if table.tool == named_tool else 0
            for rule in table.rules:
                matcher = rule.pattern.match if is_anchored(rule.pattern) else rule.pattern.search
                entries.append(_Entry(table.tool, rule, rule.weight + bonus, matcher))
        # Heaviest first; ties keep table order (sorted() is stable), so matching is deterministic.
        entries.sort(key=lambda e: -e.weight)
        self._entries = entries
        self._markers: list[tuple[str, object]] = []
        by_hint: dict[str, tuple[list[int], list[int]]] = {}
        for rank, entry in enumerate(entries):
            for hint in filter(None, entry.rule.hint.split("|")):
                for key in hint_keys(hint):
                    by_hint.setdefault(key, ([], []))[0].append(rank)
        for table in TOOL_TABLES:
            for marker in table.markers:
                matcher = marker.pattern.match if is_anchored(marker.pattern) else marker.pattern.search
                for hint in filter(None, marker.hint.split("|")):
                    for key in hint_keys(hint):
                        by_hint.setdefault(key, ([], []))[1].append(len(self._markers))
                self._markers.append((table.tool, matcher))
        for hint in STEP_HINTS:
            by_hint.setdefault(hint, ([], []))
        self._automaton = ahocorasick.Automaton()
        for hint, (ranks, markers) in by_hint.items():
            self._automaton.add_word(hint, (frozenset(ranks), frozenset(markers), int(hint.endswith("\n"))))
        self._automaton.make_automaton()

    def hit_lines(self, lower_block: str, starts: list[int]) -> set[int]:
        """Indices of the lines that contain a hint in a lower-cased block ``"\\n" + lines joined + "\\n"``.

        ``starts[i]`` is the offset of line i's first character. A hint's last character locates it,
        except that a hint ending in a line's trailing ``\\n`` belongs to that line. Matches inside a
        line already hit are skipped with one comparison.
        """
        hits: set[int] = set()
        line_end = -1  # offset of the newline that ends the last line hit
        for end, value in self._automaton.iter(lower_block):
            position = end - value[2]
            if position < line_end:
                continue
            line = bisect_right(starts, position) - 1
            hits.add(line)
            line_end = starts[line + 1] - 1 if line + 1 < len(starts) else len(lower_block)
        return hits

    def _hits(self, lower: str) -> tuple[set[int], set[int]]:
        ranks: set[int] = set()
        markers: set[int] = set()
        for _, (r, m, _) in self._automaton.iter(lower):
            ranks |= r
            markers |= m
        return ranks, markers

    def scan(
        self, text: str, body: str, active_tools: set[str] | frozenset[str] | None
    ) -> tuple[LineClass | None, str | None]:
        """(the heaviest rule matching the line, the tool whose marker the line is) for one line.

        ``needs_marker`` rules only count when their tool is in ``active_tools`` (None: always).
        """
        if not text:
            return None, None
        ranks, markers = self._hits(f"\n{text.lower()}\n")
        marker_tool = None
        for index in sorted(markers):
            tool, matcher = self._markers[index]
            if matcher(body):  # type: ignore[operator]
                marker_tool = tool
                break
        if marker_tool is not None and active_tools is not None and marker_tool not in active_tools:
            active_tools = {*active_tools, marker_tool}
        for rank in sorted(ranks):
            entry = self._entries[rank]
            rule = entry.rule
            if rule.needs_marker and not (
                active_tools is None or entry.tool == self.named_tool or entry.tool in active_tools
            ):
                continue
            if entry.matcher(text if rule.field == "text" else body):  # type: ignore[operator]
                if rule.kind == "pass":
                    return None, marker_tool  # reports success: no error line, whatever lighter rules say
                return LineClass(
                    entry.tool, rule.name, rule.kind, entry.weight, rule.points_next, rule.step_ok, rule.with_next,
                    rule.block_below,
                ), marker_tool
        return None, marker_tool


@lru_cache(maxsize=len(KNOWN_TOOLS) + 2)
def rule_index(tool: str = "auto") -> RuleIndex:
    """The compiled index for ``tool`` (cached; building one takes a few milliseconds)."""
    return RuleIndex(resolve_tool(tool))


def classify(tool: str, line: str) -> LineClass | None:
    """Classify one raw log line (ANSI, timestamps and level prefixes are handled here).

    Rules that need their tool's markers apply as if every tool were present: one line has no history.
    """
    text, body = split_line(line)
    return rule_index(tool).scan(text, body, None)[0]


def classify_line(tool: str, line: str) -> str | None:
    """The rule name when ``line`` is an error, failure, summary or exit-code line, else None.

    Cascade lines (boiler-plate such as "A complete log of this run can be found in") give None.
    """
    found = classify(tool, line)
    if found is None or found.kind == "cascade":
        return None
    return found.rule
