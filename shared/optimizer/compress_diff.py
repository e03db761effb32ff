"""Diff compressor: keep file headers, hunk headers and changed lines; drop unchanged context.

Works on ``git diff``, ``git show`` / ``git log -p`` (commit headers and messages are kept) and plain
unified diffs. Hunks are followed by their line counts from the ``@@ -a,b +c,d @@`` header, so a
context line is never confused with a commit message line or a removed line that starts with ``--``.
"""

from __future__ import annotations

import re

from shared.optimizer.outcome import CannotCompress

_INDEX_LINE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: \d+)?$")
_FILE_HEADER_STARTS = ("diff --git ", "new file mode", "deleted file mode", "old mode", "new mode", "similarity index",
                       "rename ", "copy ", "dissimilarity index")
_UNIFIED = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def compress_diff(text: str, *, query: str | None = None) -> str:
    """Return ``text`` without unchanged context (a run between two changes becomes a one-line count)."""
    del query  # every changed line matters; there is nothing to rank
    out: list[str] = []
    old_left = new_left = 0
    dropped = 0
    hunks = 0

    def flush(*, interior: bool = True) -> None:
        # Context before the first and after the last change of a hunk goes silently (the hunk header
        # says where the hunk is); a gap between two changes gets a one-line count.
        nonlocal dropped
        if dropped and interior and out and out[-1][:1] in {"+", "-", "\\"}:
            out.append(f"  … {dropped} unchanged")
        dropped = 0

    for line in text.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("\\"):  # "\ No newline at end of file" belongs to the hunk, costs nothing
                out.append(line)
                continue
            tag = line[:1]
            if tag == "+":
                new_left -= 1
                flush()
                out.append(line)
                continue
            if tag == "-":
                old_left -= 1
                flush()
                out.append(line)
                continue
            if tag in {" ", ""}:
                old_left -= 1
                new_left -= 1
                dropped += 1
                continue
            # Something else inside a hunk: the counts were wrong (hand-edited diff); leave the hunk.
            old_left = new_left = 0
        match = _UNIFIED.match(line)
        if match:
            flush(interior=False)
            hunks += 1
            old_left = int(match.group(2)) if match.group(2) is not None else 1
            new_left = int(match.group(4)) if match.group(4) is not None else 1
            out.append(line)
            continue
        flush(interior=False)
        if _INDEX_LINE.match(line) and out and out[-1].startswith(_FILE_HEADER_STARTS):
            continue  # blob ids: run-specific noise a reader cannot use
        out.append(line)
    flush(interior=False)
    if hunks == 0:
        raise CannotCompress("no_hunks", "no unified-diff hunk headers found")
    return "\n".join(out)
