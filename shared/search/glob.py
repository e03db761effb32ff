"""Glob patterns (``source_pattern`` filters) translated into an engine's regular-expression syntax.

Hand-written because :func:`fnmatch.translate` emits Python-only syntax (``(?s:...)\\Z``) that neither
Tantivy's Rust regex nor Lucene's ``regexp`` accepts. Both engines share this walk; they differ only in how a
literal character is escaped.
"""

from __future__ import annotations

from collections.abc import Callable


def glob_to_regex(glob: str, literal: Callable[[str], str]) -> str:
    """Translate ``glob`` (``fnmatch.fnmatchcase`` semantics) into an anchored regex.

    ``*`` matches any run of characters including ``/``, ``?`` one character, ``[seq]`` and ``[!seq]`` a
    character class; an unclosed ``[`` is literal, as in :mod:`fnmatch`. ``literal`` escapes one character
    for the target engine.
    """
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        i += 1
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                out.append("\\[")
                continue
            body = glob[i:j]
            i = j + 1
            negate = body.startswith("!")
            if negate:
                body = body[1:]
            parts: list[str] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    parts.append(f"{literal(body[k])}-{literal(body[k + 2])}")
                    k += 3
                else:
                    parts.append(literal(body[k]))
                    k += 1
            out.append("[" + ("^" if negate else "") + "".join(parts) + "]")
        else:
            out.append(literal(ch))
    return "".join(out)
