"""CacheAligner: move run-specific values out of the text into one trailing ``[ctx: ...]`` line.

Two runs of the same job differ in timestamps, run and request ids, SHAs, UUIDs, temp paths, durations,
pids and pod names. With those replaced by placeholders the body of a chunk is byte-identical across
runs, so a provider's KV cache hits on it; the values themselves follow in the last line.

The patterns are :mod:`shared.noise`'s, the same ones the failure signatures use: one set in the project.
Source positions (``x.py:12``) are put back after the scan: they identify the failure, not the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from shared.noise import NOISE_PATTERNS, extract_dynamic

CTX_LINE_PREFIX = "[ctx: "
# Names whose values stay in the text: stable across runs of the same code, and needed to read an error.
KEEP_IN_TEXT = frozenset({"line_col"})
# Past this many distinct values a name lists its first and last few: every per-line timestamp of a log
# would otherwise cost more tokens in the ctx line than it saved (the CCR original has them all).
MAX_VALUES_PER_NAME = 6
_HEAD, _TAIL = 3, 2

_PLACEHOLDERS = {pattern.name: pattern.placeholder for pattern in NOISE_PATTERNS}


@dataclass(frozen=True)
class Aligned:
    """The text with placeholders, and the run-specific values that were taken out (in order, with repeats)."""

    body: str
    values: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ctx_line(self) -> str:
        """``[ctx: name=v1, v2; ...]`` with names sorted and values de-duplicated; empty when no values."""
        by_name: dict[str, list[str]] = {}
        for name, value in self.values:
            seen = by_name.setdefault(name, [])
            if value not in seen:
                seen.append(value)
        if not by_name:
            return ""
        parts: list[str] = []
        for name in sorted(by_name):
            values = by_name[name]
            if len(values) > MAX_VALUES_PER_NAME:
                values = [*values[:_HEAD], f"…(+{len(values) - _HEAD - _TAIL})", *values[-_TAIL:]]
            parts.append(f"{name}={', '.join(values)}")
        return f"{CTX_LINE_PREFIX}{'; '.join(parts)}]"

    @property
    def text(self) -> str:
        """Body followed by the ctx line (when there are values)."""
        ctx = self.ctx_line
        return f"{self.body}\n{ctx}" if ctx else self.body


def align_dynamic(text: str) -> Aligned:
    """Replace run-specific values in ``text`` by placeholders and collect them (ANSI escapes are dropped)."""
    body, found = extract_dynamic(text)
    for name in KEEP_IN_TEXT:
        body = _restore(body, _PLACEHOLDERS[name], [value for n, value in found if n == name])
    return Aligned(body, [(name, value) for name, value in found if name not in KEEP_IN_TEXT])


def _restore(body: str, placeholder: str, values: list[str]) -> str:
    """Put ``values`` back in place of ``placeholder``, in order (the scan inserted them in that order)."""
    if not values or not placeholder:
        return body
    remaining = iter(values)
    return re.sub(re.escape(placeholder), lambda _m: next(remaining, placeholder), body)
