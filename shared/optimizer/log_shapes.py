"""Shapes of failure output that no single tool owns: stack frames and exception headers.

The diagnosis rule tables (``shared.diagnosis``) say which lines are errors; these patterns say how a
failure report is laid out around them, in the languages CI logs come from, so the log compressor can
keep a report whole: the header, whatever the exception printed (an expected/actual dump), the frames,
and the source snippet some runners print after them. They read the visible text of a line (ANSI codes
and the CI timestamp prefix removed).

Hand-written: stack-trace parsers that exist (for one language each) want a whole, clean trace; here a
line must be recognised on its own, in a log that mixes languages.
"""

from __future__ import annotations

import re

# One stack frame per line; each alternative starts with indentation or a literal so a non-frame line
# fails fast.
_FRAME = re.compile(
    r"""
      ^\s+at\s\S.*(?:\)|:\d+|[\s:]line\s\d+)\s*$     # Java, JavaScript, .NET: at x.y(F.java:12), at f (a.js:1:2)
    | ^\s*at\s[^,]+,\s.+:\d+\s*$                      # PowerShell/Pester: at <ScriptBlock>, C:\x.ps1:12
    | ^\s*File\s".+",\sline\s\d+                      # Python
    | ^\s*(?:\#\s|from\s)?\S+:\d+:in\s[`'‘]           # Ruby, RSpec: from x.rb:3:in `m', # x.rb:3:in `m'
    | ^\s*\S+:\d+:\sin\s                              # Lua: x.lua:12: in function 'f'
    | ^\s+\S+\.go:\d+(?:\s\+0x[0-9a-f]+)?\s*$         # Go: \t/src/x.go:12 +0x1d
    | ^[\s=]*\#\d+\s+(?:0x[0-9a-fA-F]+\s|\S+\(\d+\):|\{main\}|\[internal)  # gdb, sanitizers, PHP: #0 x.php(12): f()
    | ^\s*\d+:\s+(?:0x[0-9a-f]+\s-\s|[\w:<>]+::)      # Rust backtrace: 12: 0x55d1 - std::rt, 3: core::panicking
    | ^\s*-->\s\S+:\d+:\d+                            # rustc, clang notes: --> src/x.rs:1:5
    | ^\s*\d+\s\|(?:\s|$)                             # rustc, Elm, Babel source snippets: 12 |     let x
    | ^\s+\|(?:\s|$)                                  # ... and their marker lines
    | ^.*\sat\s\S+\sline\s\d+\.?\s*$                  # Perl: died at lib/X.pm line 12.
    | ^\x20\x20(?:[\w\-/*:.]+|\#<subr\s\S+>)\(.*\)\s*$    # Emacs Lisp backtrace: two spaces, f(args)
    | ^\x20\x20\([\w\-*]+\s.*\)\s*$                      # ... and (special-form ...)
    """,
    re.VERBOSE,
)
_SANITIZER = re.compile(r"(?:= )?==\d+==")  # AddressSanitizer and friends prefix every report line

# Lines that open a failure report whose details follow: an exception or assertion with its message,
# a traceback header, a panic.
_EXCEPTION_HEADER = re.compile(
    r"""
      ^\s*(?:[\w.$]+\.)?[A-Z]\w*(?:Error|Exception|Failure|Failed)\b(?:[:!]|\s*$)   # AssertionError: x
    | ^\s*Traceback\s\(most\srecent\scall\slast\)
    | \bpanicked\sat\b
    | ^\s*(?:panic|fatal\serror|Uncaught|Unhandled)\b
    | ^\s*(?:Expected|expected)\b.*\b(?:but|got|actual|instead)\b
    """,
    re.VERBOSE,
)


# Reports with an end marker of their own: a sanitizer's report runs to its ``==pid==ABORTING``.
_SANITIZER_START = re.compile(r"==\d+==\s*(?:ERROR|WARNING): \w*Sanitizer")
SANITIZER_END = re.compile(r"^\s*==\d+==\s*ABORTING")
# A banner: a word or two between runs of one rule character (``========DIFF========``,
# ``===== FAILURES =====``, ``---- name stdout ----``). Rulers without a word are not banners.
BANNER = re.compile(r"^\s*([=*#~+-])\1{2,} ?[^\s=*#~+-][^\n]{0,80}? ?\1{3,}\s*$")


def is_sanitizer_start(line: str) -> bool:
    """True for the first line of an AddressSanitizer (or Thread/Memory/Leak/UB sanitizer) report."""
    return _SANITIZER_START.search(line[:200]) is not None


def is_banner(line: str) -> bool:
    """True for a banner line: a short title between runs of ``=``, ``-``, ``*``, ``#``, ``~`` or ``+``."""
    return len(line) <= 160 and BANNER.match(line) is not None


# A test that passed: pytest -v, Jest/Mocha ticks, TAP and Go "ok", cargo "... ok", "[ OK ]" runners.
_PASSING = re.compile(
    r"^\s*(?:✓|✔|√|ok\b|PASS(?:ED)?\b)|\bPASS(?:ED)?\b\s*(?:\[\s*\d+%\]|\(\d|$)|\.\.\.\s*(?:ok|passed)\s*$"
    r"|\[\s*(?:OK|PASS(?:ED)?)\s*\]"
)


def is_passing_test(line: str) -> bool:
    """True for a line that reports a passing test (context that explains nothing about a failure)."""
    return _PASSING.search(line[:300]) is not None


def is_frame(line: str) -> bool:
    """True for one stack-trace line of any of the languages above (or a sanitizer report line)."""
    if not line.strip():
        return False
    return _FRAME.match(line) is not None or _SANITIZER.match(line.lstrip()) is not None


def is_exception_header(line: str) -> bool:
    """True for a line that opens a failure report: ``AssertionError: ...``, ``Traceback (most recent
    call last):``, ``thread 'x' panicked at``, ``Expected ... but got ...``."""
    return _EXCEPTION_HEADER.search(line[:400]) is not None
