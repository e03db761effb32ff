"""Diff compressor: keep what changed and where; drop unchanged context and header boiler-plate.

Works on ``git diff``, ``git show`` / ``git log -p`` and ``git format-patch`` mail (commit headers and
messages are kept) and plain unified diffs (``diff -ru``, ``svn diff``). Hunks are followed by their line
counts from the ``@@ -a,b +c,d @@`` header, so a context line is never confused with a commit message
line or a removed line that starts with ``--``.

What goes, none of it a changed line:

- unchanged context (a run between two changes of a hunk becomes ``… N unchanged``);
- a file's four header lines (``diff --git``, ``index``, ``---``, ``+++``) become one
  ``diff x`` line (``diff a/x b/y`` for a rename; ``new file``, ``deleted file``, ``rename`` and mode lines stay);
  a plain diff's ``---``/``+++`` pair, with the ``diff -ru`` command or ``Index:``/``====`` lines above it and
  the file times, becomes ``diff old new`` (``diff x`` when both name the same file);
- ``git format-patch`` wrapping: the mbox separator's fixed fake date (``From <sha> Mon Sep 17 00:00:00
  2001`` becomes ``commit <sha>``), the diffstat (the hunks say the same) and the ``-- `` signature with
  git's version;
- the section name after a hunk header (``@@ ... @@ def f():``) when the hunk before it in the same
  file named the same section;
- a block of three or more added lines that repeats, line for line, a block removed elsewhere in the
  same diff (a move) becomes ``+… N lines moved from <file>`` (``, re-indented`` when the indentation
  changed, which in Python is a change of meaning; with ``fold_moves``).
"""

from __future__ import annotations

import re

from shared.optimizer.outcome import CannotCompress

_INDEX_LINE = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: \d+)?$")
_GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)$")
_FILE_HEADER_STARTS = ("new file mode", "deleted file mode", "old mode", "new mode", "similarity index",
                       "rename ", "copy ", "dissimilarity index")
_UNIFIED = re.compile(r"^(@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@)(.*)$")
_MBOX_SEPARATOR = re.compile(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$")
# Diffstat lines between format-patch's "---" and the first file: " path | 4 ++--", "Bin 0 -> 12 bytes",
# the "N files changed" summary and the create/delete/rename/mode notes (the file headers repeat them).
_DIFFSTAT = re.compile(r"^ (?:\S.*\| +(?:\d+ ?[+-]*|Bin .*)|\d+ files? changed.*|(?:create|delete) mode \d+ .*|rename .*\(\d+%\)"
                       r"|mode change .*)$")
_GIT_VERSION = re.compile(r"^\d+\.\d+(?:\.\w+)*$")  # the line under format-patch's "-- " signature
_SVN_RULE = re.compile(r"^={20,}$")
MIN_MOVED_LINES = 3
MAX_MOVE_CANDIDATES = 32


def compress_diff(text: str, *, query: str | None = None, fold_moves: bool = True) -> str:
    """Return ``text`` without unchanged context and with one header line per file."""
    del query  # every changed line matters; there is nothing to rank
    out: list[str] = []
    # Where each kept changed line sits in ``out``, and which file it belongs to, for the move fold.
    changed: list[tuple[int, str]] = []
    old_left = new_left = 0
    dropped = 0
    hunks = 0
    current_file = ""
    last_section = ""
    pending_git: tuple[str, str] | None = None  # a "diff --git a/x b/y" line waiting for its ---/+++
    in_header = False  # between a "diff --git" line and its first hunk
    in_stat = False  # between format-patch's "---" line and the first file

    def flush(*, interior: bool = True) -> None:
        # Context before the first and after the last change of a hunk goes silently (the hunk header
        # says where the hunk is); a gap between two changes gets a one-line count.
        nonlocal dropped
        if dropped and interior and out and out[-1][:1] in {"+", "-", "\\"}:
            out.append(f"  … {dropped} unchanged")
        dropped = 0

    def emit_pending() -> None:
        nonlocal pending_git
        if pending_git is not None:
            out.append(_file_line(*pending_git))
            pending_git = None

    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if old_left > 0 or new_left > 0:
            if line.startswith("\\"):  # "\ No newline at end of file" belongs to the hunk, costs nothing
                out.append(line)
                continue
            tag = line[:1]
            if tag == "+":
                new_left -= 1
                flush()
                changed.append((len(out), current_file))
                out.append(line)
                continue
            if tag == "-":
                old_left -= 1
                flush()
                changed.append((len(out), current_file))
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
            emit_pending()
            in_header = False
            hunks += 1
            old_left = int(match.group(3)) if match.group(3) is not None else 1
            new_left = int(match.group(5)) if match.group(5) is not None else 1
            section = match.group(6).strip()
            out.append(match.group(1) if section and section == last_section else line)
            last_section = section
            continue
        flush(interior=False)
        git = _GIT_HEADER.match(line)
        if git:
            emit_pending()
            pending_git = (git.group(1), git.group(2))
            in_header = True
            in_stat = False
            current_file = _unprefixed(git.group(2), "b/")
            last_section = ""
            continue
        if not in_header:
            mbox = _MBOX_SEPARATOR.match(line)
            if mbox:
                out.append(f"commit {mbox.group(1)}")  # the commit id stays; the date is a constant
                continue
            if in_stat and not line.strip():
                in_stat = False
            if line == "---":
                in_stat = True  # format-patch: the diffstat follows until the first file
            elif in_stat and _DIFFSTAT.match(line):
                continue
            elif line == "-- " and index < len(lines) and _GIT_VERSION.match(lines[index]):
                index += 1  # the signature and git's version, not part of any change
                continue
            if (line.startswith("--- ") and index + 1 < len(lines) and lines[index].startswith("+++ ")
                    and _UNIFIED.match(lines[index + 1])):
                current_file = _plain_header(out, line, lines[index])
                index += 1
                in_stat = False
                last_section = ""
                continue
        if in_header:
            if _INDEX_LINE.match(line):
                continue  # blob ids: run-specific noise a reader cannot use
            if line.startswith(("--- ", "+++ ")):
                # The git header already names both sides; ---/+++ only repeat it (or say /dev/null,
                # which the new/deleted file line says too).
                continue
            emit_pending()
            if not line.startswith(_FILE_HEADER_STARTS):
                in_header = False
        elif line.startswith("+++ "):
            current_file = _unprefixed(_header_path(line), "b/")
            last_section = ""
        out.append(line)
    flush(interior=False)
    emit_pending()
    if hunks == 0:
        raise CannotCompress("no_hunks", "no unified-diff hunk headers found")
    if fold_moves:
        out = _fold_moves(out, changed)
    return "\n".join(out)


def _header_path(line: str) -> str:
    """The path of a plain diff's ``--- path\t2006-07-31 01:20:10`` line, without the file time."""
    return line[4:].split("\t", 1)[0].strip()


def _plain_header(out: list[str], old_line: str, new_line: str) -> str:
    """Append one ``diff`` line for a plain diff's ``---``/``+++`` pair and return the file's name.

    The ``diff -ru old new`` command line and svn's ``Index: path`` and ``====`` lines just above name
    the same files again, so they go too. ``/dev/null`` on one side says the file is new or deleted.
    """
    old, new = _header_path(old_line), _header_path(new_line)
    if (len(out) > 1 and _SVN_RULE.match(out[-1]) and out[-2].startswith("Index: ")
            and out[-2][len("Index: "):].strip() in {old, new}):
        del out[-2:]
    elif out and out[-1].startswith("diff ") and not out[-1].startswith("diff --git ") and (
            out[-1].split()[-2:] == [old, new]):
        out.pop()
    if old == "/dev/null":
        out.append(f"new file {_unprefixed(new, 'b/')}")
    elif new == "/dev/null":
        out.append(f"deleted file {_unprefixed(old, 'a/')}")
    else:
        out.append(_file_line(old, new))
    return _unprefixed(old, "a/") if new == "/dev/null" else _unprefixed(new, "b/")


def _unprefixed(path: str, prefix: str) -> str:
    """``path`` without git's side prefix (``a/`` for the old side, ``b/`` for the new one)."""
    return path[len(prefix):] if path.startswith(prefix) else path


def _file_line(old: str, new: str) -> str:
    """The one header line of a file: ``diff x`` when both sides name the same file, else both paths."""
    same = old == new or (old.startswith("a/") and new.startswith("b/") and old[2:] == new[2:])
    return f"diff {_unprefixed(new, 'b/')}" if same else f"diff {old} {new}"


def _fold_moves(out: list[str], changed: list[tuple[int, str]]) -> list[str]:
    """Replace added lines that repeat, in order, three or more removed lines (indentation ignored)."""
    runs: list[tuple[str, int, int, str]] = []  # tag, first index in out, last index, file
    for position, file in changed:
        tag = out[position][:1]
        if runs and runs[-1][0] == tag and runs[-1][2] == position - 1 and runs[-1][3] == file:
            runs[-1] = (tag, runs[-1][1], position, file)
        else:
            runs.append((tag, position, position, file))
    removed: list[tuple[list[str], str, int]] = []  # stripped lines, file, index of the first in out
    where: dict[str, list[tuple[int, int]]] = {}  # line content -> (removed run, offset)
    for tag, first, last, file in runs:
        if tag == "-" and last - first + 1 >= MIN_MOVED_LINES:
            content = [out[i][1:].strip() for i in range(first, last + 1)]
            for offset, value in enumerate(content):
                if value:
                    where.setdefault(value, []).append((len(removed), offset))
            removed.append((content, file, first))
    if not removed:
        return out
    replace: dict[int, tuple[int, str]] = {}  # first added line -> (last added line, marker)
    for tag, first, last, _file in runs:
        if tag != "+":
            continue
        position = first
        while position <= last - MIN_MOVED_LINES + 1:
            best = (0, "", 0, 0)
            start = out[position][1:].strip()
            # A short line ("}", "else:") starts no move, and a line removed in many places is tried in
            # its first few only: a big diff full of repeated lines must stay linear.
            candidates = where.get(start, ()) if len(start) >= 4 else ()
            for run, offset in candidates[:MAX_MOVE_CANDIDATES]:
                content, file, removed_first = removed[run]
                length = 0
                while (position + length <= last and offset + length < len(content)
                       and out[position + length][1:].strip() == content[offset + length]):
                    length += 1
                if length > best[0]:
                    best = (length, file, removed_first + offset, run)
            length, file, source_first, _ = best
            if length >= MIN_MOVED_LINES:
                # Indentation is meaning (Python): a block that came back deeper or shallower says so.
                same = all(out[position + i][1:] == out[source_first + i][1:] for i in range(length))
                marker = f"+… {length} lines moved from {file}" + ("" if same else ", re-indented")
                replace[position] = (position + length - 1, marker)
                position += length
            else:
                position += 1
    if not replace:
        return out
    folded: list[str] = []
    position = 0
    while position < len(out):
        if position in replace:
            end, marker = replace[position]
            folded.append(marker)
            position = end + 1
            continue
        folded.append(out[position])
        position += 1
    return folded
