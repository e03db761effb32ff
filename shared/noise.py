"""The one set of run-noise patterns: what differs between two runs of the same failure.

Failure signatures (:mod:`shared.diagnosis`) and the context optimizer both normalise text with these
patterns, so a line that one of them calls "the same" the other does too.

A pattern's ``regex`` either replaces its whole match with ``placeholder`` or, when it has named groups
whose names start with ``v`` (``v``, ``v2``, ...), only the first of those groups that took part in the
match; the rest of the match is context that stays (``pid=<pid>``, ``x.py:<ln>``, ``I<ts> ...``).

The patterns are applied one after the other in :data:`NOISE_PATTERNS` order; a pattern never sees
inside an earlier placeholder (no pattern matches ``<`` or ``>``, but for Erlang's ``<0.42.0>`` process ids,
whose digits no placeholder holds). Nothing depends on locale, time zone
or dictionary order.

Speed matters (every log line of the optimizer goes through here), so each regex starts with a literal
or a narrow character class, with any "not preceded by" check placed after that first character
(``\\d(?<![\\d.]\\d)`` rather than ``(?<![\\d.])\\d``): Python's ``re`` then skips most positions
quickly. ``requires`` lists cheap prerequisites checked first: the pattern only runs when the text meets all
of them (each is ``"\\\\d"`` for a digit, or lower-case substrings of which one must occur, ``"a|b"``).

Hand-written because no maintained library normalises CI logs this way (log-template miners such as
Drain3 learn templates from many lines; here one line must normalise on its own, deterministically).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class NoisePattern:
    """One kind of run-specific value: its name, how to find it and what replaces it.

    ``requires``: prerequisites that must all hold before the regex runs: ``"\\\\d"`` (a digit) or
    ``"a|b"`` (one of these lower-case substrings occurs); empty means always. ``accept``: an extra
    check on the matched value (a match it rejects stays as it is).
    """

    name: str
    regex: re.Pattern[str]
    placeholder: str
    requires: tuple[str, ...] = ()
    accept: Callable[[str], bool] | None = None


ANSI_RE: re.Pattern[str] = re.compile(
    # CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks; never across a newline)
    # and lone escapes.
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
)

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_ZONE = r"(?:UTC|GMT|Z|[ECMP][SD]T|CES?T|BST|JST|IST|[+-]\d{2}:?\d{2})"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:\s?[AP]M)?(?:\s+" + _ZONE + r"(?![A-Za-z]))?(?:\s+\d{4}(?!\d))?"
# A path component: stops at whitespace, quotes, brackets, separators and ':' (so x.py:12 keeps :12).
_C = r"[^\s/\\'\"()\[\]<>{},;:|*?=`]"
# Directories that start the project-relative part of a path in the projects we see in CI logs.
_PROJECT_MARKERS = r"(?:src|lib|libs|test|tests|testing|spec|specs|pkg|cmd|internal|packages|crates|apps|include|app)"
# Directories under which third-party code lives; the part from them on is the same on every machine.
_LIBRARY_MARKERS = (
    r"(?:site-packages|dist-packages|node_modules|vendor|\.m2/repository|go/pkg/mod|\.cargo/registry/src/"
    + _C
    + r"+|\.gradle/caches)"
)
# First components of absolute paths whose prefix is machine- or run-specific.
_ROOTS = (
    r"(?:home|Users|root|opt|usr|var|private|mnt|data|srv|nix|snap|go|Library|builds|github|__w|workspace|code|"
    r"build|runner|jenkins|drone)"
)
# Well-known CI checkout roots (after the leading '/'): everything after them is the project-relative path.
_CI_ROOTS = (
    r"(?:home/runner/work/" + _C + r"+/" + _C + r"+/"
    r"|Users/runner/work/" + _C + r"+/" + _C + r"+/"
    r"|__w/" + _C + r"+/" + _C + r"+/"
    r"|github/workspace/"
    r"|builds/(?:" + _C + r"+/)?" + _C + r"+/" + _C + r"+/"
    r"|home/travis/build/" + _C + r"+/" + _C + r"+/"
    r"|Users/travis/build/" + _C + r"+/" + _C + r"+/"
    r"|home/circleci/(?:project|repo)/"
    r"|(?:var/lib/)?jenkins/workspace/" + _C + r"+/"
    r"|drone/src/"
    r"|opt/atlassian/pipelines/agent/build/"
    r"|usr/src/app/|workspace/|app/|code/)"
)
# Ephemeral ports (Linux 32768-60999, IANA 49152-65535); well-known ports tell failures apart and stay.
_EPHEMERAL_PORT = r"(?:3[2-9]\d{3}|[45]\d{4}|6[0-5]\d{3})(?!\d)"
# Kubernetes random suffixes use this alphabet (no vowels, no 0/1/3) so they never spell words.
_K8S = r"[bcdfghjklmnpqrstvwxz2456789]"
_SOURCE_EXT = (
    r"(?:py|pyx|pyi|js|mjs|cjs|jsx|ts|tsx|vue|svelte|go|rs|java|kt|kts|scala|groovy|gradle|c|h|cc|cpp|cxx|hpp|hh|"
    r"m|mm|swift|rb|erb|php|cs|fs|vb|sh|bash|zsh|ps1|pl|pm|lua|dart|ex|exs|erl|hs|ml|clj|r|R|jl|sql|proto|"
    r"tf|hcl|ya?ml|json|toml|xml|html?|css|scss|less|md|rst|txt|ini|cfg|mk|cmake|s|S|asm|zig|nim|d|f90|coffee)"
)

_DIGIT = ("\\d",)
_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"


def _is_git_like(value: str) -> bool:
    """A hex run is a SHA or id only when it mixes digits and letters ("deadbeef", "1234567" are not)."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _p(
    name: str,
    pattern: str,
    placeholder: str,
    requires: tuple[str, ...] = (),
    accept: Callable[[str], bool] | None = None,
) -> NoisePattern:
    return NoisePattern(name, re.compile(pattern, re.MULTILINE), placeholder, requires, accept)


NOISE_PATTERNS: tuple[NoisePattern, ...] = (
    # --- paths -----------------------------------------------------------------------------------
    # Temp dirs: drop every directory, keep the base name: /tmp/pytest-of-bob/pytest-12/test_a0/f.txt -> <tmp>/f.txt
    _p(
        "tmp_path",
        r"(?:/(?<![\w.~/:-]/)(?:tmp|var/tmp|dev/shm|(?:private/)?var/folders/" + _C + r"+/" + _C + r"+/T)"
        r"|[A-Za-z]:\\Users\\" + _C + r"+\\AppData\\Local\\Temp|\$TMPDIR|%TEMP%)"
        r"(?:[/\\]" + _C + r"+)*?(?=[/\\]" + _C + r"++(?![/\\]))",
        "<tmp>",
        ("tmp|temp|/var/folders|/dev/shm",),
    ),
    # Absolute paths: the machine-specific prefix goes, the project-relative part (or the base name) stays:
    # /home/runner/work/app/app/src/x.py -> src/x.py; /usr/lib/python3.11/site-packages/a/b.py -> site-packages/a/b.py
    _p(
        "abs_path",
        r"/(?<![\w.~/:-]/)(?:"
        + _C + r"+(?:/" + _C + r"+)*/(?=" + _LIBRARY_MARKERS + r"/)"
        r"|" + _CI_ROOTS
        + r"|" + _ROOTS + r"(?:/" + _C + r"+)*?/(?=" + _PROJECT_MARKERS + r"/|" + _C + r"++(?!/))"
        r")",
        "",
        ("/",),
    ),
    _p(
        "abs_path",
        r"[A-Za-z](?<![\w][A-Za-z]):\\(?:a\\" + _C + r"+\\" + _C + r"+\\"
        r"|(?:" + _C + r"+\\)*?(?=" + _PROJECT_MARKERS + r"\\|" + _C + r"++(?!\\)))",
        "",
        (":\\",),
    ),
    # --- timestamps ------------------------------------------------------------------------------
    # ISO 8601 / RFC 3339 (GitHub Actions' 7-digit fraction too), date-only, ``,ms`` (Python logging),
    # and the ``_`` form of file names (npm's _logs/2026-11-29T20_18_37_123Z-debug-0.log).
    _p(
        "timestamp",
        r"\d(?<![\d.]\d)\d{3}-\d{2}-\d{2}(?:[T ]\d{2}[:_]\d{2}(?:[:_]\d{2})?(?:[.,_]\d+)?)?"
        r"(?:\s?" + _ZONE + r"(?![A-Za-z]))?(?!\d)",
        "<ts>",
        ("\\d", "-"),
    ),
    # Go's log package and friends: 2026/11/29 20:18:37.123
    _p("timestamp", r"\d(?<!\d\d)\d{3}/\d{2}/\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?!\d)", "<ts>", ("\\d", "/")),
    # klog (Kubernetes, glog): I1129 20:18:37.123456   12345 file.go:12] -- keep the severity letter.
    _p("timestamp", r"[IWEF](?<!\w[IWEF])(?P<v>\d{4} \d{2}:\d{2}:\d{2}\.\d+(?:\s+\d+)?)(?= )", "<ts>", ("\\d", "i0|i1|w0|w1|e0|e1|f0|f1")),
    # ctime and RFC 2822 / HTTP dates: Mon Nov 29 20:18:37 UTC 2026, Sat, 29 Nov 2026 20:18:37 GMT
    _p(
        "timestamp",
        r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+(?:\d{1,2}\s+)?" + _MONTH + r"\s+(?:\d{1,2},?\s+)?(?:\d{4}\s+)?" + _CLOCK,
        "<ts>",
        ("\\d", "mon|tue|wed|thu|fri|sat|sun"),
    ),
    # syslog and friends: Nov 29 20:18:37, 29 Nov 2026 20:18:37
    _p("timestamp", _MONTH + r"\s+\d{1,2},?\s+(?:\d{4}\s+)?" + _CLOCK, "<ts>", ("\\d", _MONTHS)),
    _p("timestamp", r"\d(?<!\w\d)\d?\s+" + _MONTH + r"\s+\d{4}\s+" + _CLOCK, "<ts>", ("\\d", _MONTHS)),
    # Apache / nginx access logs: 29/Nov/2026:20:18:37 +0000
    _p("timestamp", r"\d(?<!\w\d)\d/" + _MONTH + r"/\d{4}:\d{2}:\d{2}:\d{2}(?:\s[+-]\d{4})?", "<ts>", ("\\d", _MONTHS)),
    # A bare time of day: [20:18:37.123], 20:18:37,123 (never part of a:b:c:d or file:line:col).
    _p("timestamp", r"\d(?<![\w:.]\d)\d?:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:\s?(?:[AP]M|Z))?(?![\w:])", "<ts>", ("\\d", ":")),
    # Epoch seconds or milliseconds in brackets, kernel/uptime stamps [   12.345678], bare epoch ms (2014-2033).
    _p("timestamp", r"\[(?P<v>\d{10}(?:\d{3})?(?:\.\d+)?|\s*\d+\.\d{6})\]", "<ts>", ("\\d", "[")),
    _p("timestamp", r"1(?<![\w.]1)[4-9]\d{11}(?![\w.])", "<ts>", _DIGIT),
    # --- identifiers -----------------------------------------------------------------------------
    _p(
        "uuid",
        r"[0-9a-fA-F](?<![\w-][0-9a-fA-F])[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])",
        "<uuid>",
        ("\\d", "-"),
    ),
    _p(
        "request_id",
        r"(?i:(?:x-)?(?:request|req|trace|span|correlation|transaction|invocation|run|job|build)[-_ ]?id\b"
        r"[\"']?\s*[:=]?\s*[\"']?)(?P<v>(?=[\w.:-]*\d)[\w.:-]{4,})",
        "<id>",
        ("\\d", "id"),
    ),
    # --- hex -------------------------------------------------------------------------------------
    _p("hex", r"[0-9a-fA-F](?<![\w-][0-9a-fA-F])[0-9a-fA-F]{40,}(?![\w-])", "<hex>", _DIGIT),
    _p("address", r"0x(?<!\w0x)[0-9a-fA-F]{9,16}\b|\+(?P<v>0x[0-9a-fA-F]+)\b", "<addr>", ("0x",)),
    # Long hex glued to a name by '-', '_' or '.': build-dir and bundle hashes (jemalloc-sys-8599e81d749c60c3).
    _p("hex", r"[0-9a-f](?<=[-_.][0-9a-f])[0-9a-f]{11,39}(?![0-9A-Za-z])", "<hex>", _DIGIT, _is_git_like),
    # Git SHAs, full or abbreviated, container ids: 7-40 lower-case hex mixing digits and letters.
    _p("sha", r"[0-9a-f](?<![\w-][0-9a-f])[0-9a-f]{6,39}(?![\w-])", "<sha>", _DIGIT, _is_git_like),
    # --- network ---------------------------------------------------------------------------------
    # Private IPv4 (pod, container and runner addresses); public ones and 127.0.0.1 stay.
    _p(
        "ip",
        r"1(?<![\d.]1)(?:0(?:\.\d{1,3}){3}|72\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}|92\.168(?:\.\d{1,3}){2})(?![\d.])",
        "<ip>",
        ("\\d", "10.|172.|192.168"),
    ),
    _p("port", r":(?<=[\w\]>]:)(?P<v>" + _EPHEMERAL_PORT + r")|[Pp]ort\s+(?P<v2>" + _EPHEMERAL_PORT + r")", "<port>", ("\\d", ":|port")),
    # --- positions in source -------------------------------------------------------------------
    # x.py:12, x.go:12:5, Foo.java:[12,5], X.cs(12,5), Makefile:12, 'line 12', 'column 5'
    _p(
        "line_col",
        r"\.(?:" + _SOURCE_EXT + r")(?::(?P<v>\d+(?::\d+)?)(?![\d.])|:\[(?P<v2>\d+,\d+)\]|\((?P<v3>\d+(?:,\d+)?)\))",
        "<ln>",
        ("\\d", "."),
    ),
    _p("line_col", r"(?:Makefile|Dockerfile|Jenkinsfile):(?P<v>\d+)", "<ln>", ("\\d", "makefile|dockerfile|jenkinsfile")),
    _p("line_col", r"(?:[Ll]ine|LINE|[Cc]olumn|[Cc]ol)\s+(?P<v>\d+)\b", "<ln>", ("\\d", "line|col")),
    # --- time spent ------------------------------------------------------------------------------
    # 12s, 0.5ms, 3h, 1h2m3.4s, 1m23.4s, 12 seconds, 0.123 s, 1:23 min (Maven's total time)
    _p(
        "duration",
        r"\d(?<![\w.]\d)\d*(?:"
        r"(?:\.\d+)?(?:ns|us|µs|ms|s|sec|secs|min|mins|m|hr|hrs|h)(?!\w)"
        r"|h\d+m(?:\d+(?:\.\d+)?s)?(?!\w)|h\d+(?:\.\d+)?s(?!\w)"
        r"|m\d+(?:\.\d+)?s(?!\w)"
        r"|\.\d+\s[smh](?!\w)"
        r"|(?:\.\d+)?\s(?:ns|us|µs|ms|secs?|seconds?|minutes?|mins?|hours?|hrs?|milliseconds?)(?!\w)"
        r"|:\d{2}\s?min(?!\w)"
        r")",
        "<dur>",
        _DIGIT,
    ),
    # BuildKit prefixes the step's elapsed seconds: '#8 12.34 npm ERR! ...'
    _p("duration", r"^#\d+ (?P<v>\d+\.\d+) ", "<dur>", ("#",)),
    # --- processes -------------------------------------------------------------------------------
    _p(
        "pid",
        r"(?i:\b(?:pid|process|tid|thread|goroutine)\b[\s=:#]*)(?P<v>\d+)\b",
        "<pid>",
        ("\\d", "pid|process|tid|thread|goroutine"),
    ),
    _p("pid", r"\[(?<=[A-Za-z]\[)(?P<v>\d+)\](?=:)|gw(?<!\wgw)(?P<v2>\d+)\b", "<pid>", ("\\d", "[|gw")),  # sshd[12]:, xdist gw3
    # Erlang process ids: <0.1364.0>, <19038.1364.0> (node, process, serial).
    _p("pid", r"<(?<![\w<]<)\d+\.\d+\.\d+>", "<pid>", ("\\d", "<")),
    # Pod names: web-7d4b9c8f6d-x2x7k -> web-<pod>; job pods with one suffix need a digit to be told from words.
    _p(
        "pod_suffix",
        r"-(?<=[a-z0-9]-)(?:(?P<v>" + _K8S + r"{6,10}-" + _K8S + r"{5})(?![\w-])"
        r"|(?P<v2>(?=" + _K8S + r"*[2456789])(?=" + _K8S + r"*[a-z])" + _K8S + r"{5})(?![\w-]))",
        "<pod>",
        ("-",),
    ),
    # Random parts of temp names: tmpk2j3h4x9 (Python tempfile), tmp.AbC123XyZ (mktemp).
    _p("tmp_name", r"tmp(?<!\wtmp)(?:(?P<v>(?=\w*\d)[A-Za-z0-9_]{6,10})\b|\.(?P<v2>[A-Za-z0-9]{6,12})\b)", "<rand>", ("tmp",)),
)

_VALUE_GROUP_RE = re.compile(r"\(\?P<(v\d*)>")
_DIGIT_RE = re.compile(r"\d")


@cache
def _value_groups(index: int) -> tuple[str, ...]:
    return tuple(_VALUE_GROUP_RE.findall(NOISE_PATTERNS[index].regex.pattern))


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, cursor moves, hyperlinks)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return ANSI_RE.sub("", text)


@cache
def _split_requirement(requirement: str) -> tuple[str, ...]:
    return tuple(requirement.split("|"))


def _applies(pattern: NoisePattern, lower: str, has_digit: bool) -> bool:
    for requirement in pattern.requires:
        if requirement == "\\d":
            if not has_digit:
                return False
        elif not any(option in lower for option in _split_requirement(requirement)):
            return False
    return True


def _replace_one(
    index: int, text: str, found: list[tuple[int, str, str]] | None
) -> tuple[str, list[tuple[int, int, int]]]:
    """Apply pattern ``index`` to ``text``.

    Returns the new text and, when ``found`` is given, each replacement as (start, old end, new length)
    in the input's coordinates, after appending (position in the new text, name, value) to ``found``.
    """
    pattern = NOISE_PATTERNS[index]
    groups = _value_groups(index)
    if found is None and not groups and pattern.accept is None:
        return pattern.regex.sub(pattern.placeholder.replace("\\", "\\\\"), text), []
    pieces: list[str] = []
    edits: list[tuple[int, int, int]] = []
    last = 0
    shift = 0
    for match in pattern.regex.finditer(text):
        start, end = match.span()
        for group in groups:
            if match.start(group) >= 0:
                start, end = match.span(group)
                break
        value = text[start:end]
        if pattern.accept is not None and not pattern.accept(value):
            continue
        pieces.append(text[last:start])
        pieces.append(pattern.placeholder)
        if found is not None:
            found.append((start + shift, pattern.name, value))
            edits.append((start, end, len(pattern.placeholder)))
        shift += len(pattern.placeholder) - (end - start)
        last = end
    if not pieces:
        return text, []
    pieces.append(text[last:])
    return "".join(pieces), edits


def _normalise(text: str, keep: frozenset[str], found: list[tuple[int, str, str]] | None) -> str:
    text = strip_ansi(text)
    lower = text.lower()
    has_digit = _DIGIT_RE.search(text) is not None
    for index, pattern in enumerate(NOISE_PATTERNS):
        if pattern.name in keep or not _applies(pattern, lower, has_digit):
            continue
        before = len(found) if found is not None else 0
        new_text, edits = _replace_one(index, text, found)
        if found is not None and edits:
            # Earlier finds move with this pattern's replacements that lie before them.
            for i in range(before):
                position, name, value = found[i]
                delta = sum(new_len - (end - start) for start, end, new_len in edits if end <= position)
                found[i] = (position + delta, name, value)
        if new_text is not text:
            text = new_text
            lower = text.lower()
    return text


def normalise_text(text: str, *, keep: frozenset[str] = frozenset()) -> str:
    """ANSI stripped, every pattern (except names in ``keep``) replaced by its placeholder."""
    return _normalise(text, keep, None)


def extract_dynamic(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(text with placeholders, [(pattern name, original value), ...] in order of appearance)."""
    found: list[tuple[int, str, str]] = []
    normalised = _normalise(text, frozenset(), found)
    return normalised, [(name, value) for _, name, value in sorted(found, key=lambda f: f[0])]


__all__ = ["ANSI_RE", "NOISE_PATTERNS", "NoisePattern", "extract_dynamic", "normalise_text", "strip_ansi"]
