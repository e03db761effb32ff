"""Run-noise normalisation: what differs between two runs goes, what tells failures apart stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.noise import NOISE_PATTERNS, extract_dynamic, normalise_text, strip_ansi

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # timestamps of every common format
        ("2026-11-29T20:18:37.1234567Z ##[error]boom", "<ts> ##[error]boom"),
        ("2024-01-01 12:00:00,123 ERROR db down", "<ts> ERROR db down"),
        ("2026-11-29T20:18:37+01:00 started", "<ts> started"),
        ("Nov 29 20:18:37 host sshd[1234]: failed", "<ts> host sshd[<pid>]: failed"),
        ("Mon Nov 29 20:18:37 UTC 2026 build", "<ts> build"),
        ("Sat, 29 Nov 2026 20:18:37 GMT", "<ts>"),
        ("[20:18:37.123] INFO started", "[<ts>] INFO started"),
        ("[1701288000123] tick", "[<ts>] tick"),
        ("2026/11/29 20:18:37 listening", "<ts> listening"),
        ("I1129 20:18:37.123456   12345 reflector.go:138] watch closed", "I<ts> reflector.go:<ln>] watch closed"),
        ("[   12.345678] oom-killer invoked", "[<ts>] oom-killer invoked"),
        # paths: keep the base name and the project-relative part
        ("/home/runner/work/app/app/src/x.py:12: error", "src/x.py:<ln>: error"),
        ("/tmp/pytest-of-bob/pytest-12/test_a0/f.txt missing", "<tmp>/f.txt missing"),
        ("/usr/lib/python3.11/site-packages/yaml/reader.py", "site-packages/yaml/reader.py"),
        ("/home/travis/build/acme/shop/lib/cart.rb:7:in `add'", "lib/cart.rb:<ln>:in `add'"),
        ("D:\\a\\shop\\shop\\src\\Cart.cs(12,5): error", "src\\Cart.cs(<ln>): error"),
        ("C:\\Users\\ci\\AppData\\Local\\Temp\\xyz1\\out.txt", "<tmp>\\out.txt"),
        # hex, ids, addresses
        ("at commit 3f2a1bc9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3", "at commit <sha>"),
        ("image sha256:" + "ab12" * 16, "image sha256:<hex>"),
        ("segfault at 0x7ffd5e3c2a10", "segfault at <addr>"),
        ("req 123e4567-e89b-12d3-a456-426614174000 failed", "req <uuid> failed"),
        ("request_id=abc-123-def timed out", "request_id=<id> timed out"),
        # durations, processes, ports, pods, temp names
        ("--- FAIL: TestParse (0.00s)", "--- FAIL: TestParse (<dur>)"),
        ("Tests run: 3, Time elapsed: 0.123 s", "Tests run: 3, Time elapsed: <dur>"),
        ("took 1m23.4s", "took <dur>"),
        ("Killed process 4321 (java)", "Killed process <pid> (java)"),
        ("Reason: {noproc,{gen_server,call,[<0.1364.0>,stop]}}", "Reason: {noproc,{gen_server,call,[<pid>,stop]}}"),
        ("Error in process <19038.13.0> on node 'ct@host'", "Error in process <pid> on node 'ct@host'"),
        ("List<1.2.3> and <1.2> stay", "List<1.2.3> and <1.2> stay"),
        ("listening on 127.0.0.1:54321", "listening on 127.0.0.1:<port>"),
        ("dial tcp 10.96.0.1:443: i/o timeout", "dial tcp <ip>:443: i/o timeout"),
        ("pod web-7d4b9c8f6d-x2x7k crashed", "pod web-<pod> crashed"),
        ("wrote /tmp/tmpk2j3h4x9", "wrote <tmp>/tmp<rand>"),
        ("\x1b[31merror\x1b[0m: thing", "error: thing"),
    ],
)
def test_noise_is_replaced(line: str, expected: str) -> None:
    assert normalise_text(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "error[E0308]: mismatched types",
        "npm ERR! code ERESOLVE",
        "connection refused on 127.0.0.1:5432",  # well-known ports tell failures apart
        "https://github.com/acme/shop/blob/main/x.py",
        "exit code 137",
        "the decade added a cafe",  # hex letters without digits are words
        "HTTP 404 from registry.example.org",
    ],
)
def test_what_tells_failures_apart_stays(line: str) -> None:
    assert normalise_text(line) == line


def test_keep_leaves_named_patterns_alone() -> None:
    line = "src/x.py:12 at 2026-01-01T10:00:00Z"
    assert normalise_text(line, keep=frozenset({"line_col"})) == "src/x.py:12 at <ts>"
    assert normalise_text(line, keep=frozenset({"timestamp"})) == "src/x.py:<ln> at 2026-01-01T10:00:00Z"


def test_extract_dynamic_lists_values_in_order_of_appearance() -> None:
    text, found = extract_dynamic("2026-11-29T20:18:37Z pid=42 /tmp/a/b.txt x.py:3")
    assert text == "<ts> pid=<pid> <tmp>/b.txt x.py:<ln>"
    assert found == [("timestamp", "2026-11-29T20:18:37Z"), ("pid", "42"), ("tmp_path", "/tmp/a"), ("line_col", "3")]
    assert text == normalise_text("2026-11-29T20:18:37Z pid=42 /tmp/a/b.txt x.py:3")


def test_strip_ansi_removes_colours_and_hyperlinks() -> None:
    assert strip_ansi("\x1b[1;31mFAIL\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07") == "FAIL link"


def test_every_pattern_has_a_placeholder_free_of_its_own_match() -> None:
    # A placeholder that a later pattern could match again would make normalisation unstable.
    for pattern in NOISE_PATTERNS:
        for other in NOISE_PATTERNS:
            if pattern.placeholder:
                assert not other.regex.fullmatch(pattern.placeholder), (pattern.name, other.name)


_WORDS = st.sampled_from(["npm", "ERR!", "error:", "cannot", "find", "module", "test_parse", "FAILED", "at", "in"])


@st.composite
def _noisy_line(draw: st.DrawFn) -> tuple[str, str]:
    """The same log line as two runs print it: words fixed, run noise drawn twice."""
    words = draw(st.lists(_WORDS, min_size=1, max_size=6))

    def render() -> str:
        stamp = (
            f"2026-{draw(st.integers(1, 12)):02d}-{draw(st.integers(1, 28)):02d}T"
            f"{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}:{draw(st.integers(0, 59)):02d}."
            f"{draw(st.integers(0, 9999999)):07d}Z"
        )
        tmp = "/tmp/" + draw(st.text("abcdefghij0123456789", min_size=4, max_size=10)) + "/out.log"
        sha = draw(st.text("0123456789abcdef", min_size=40, max_size=40).filter(lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s)))
        pid = draw(st.integers(2, 99999))
        seconds = draw(st.integers(0, 999))
        return f"{stamp} {' '.join(words)} {tmp} commit {sha} pid {pid} ({seconds}.{draw(st.integers(0, 99)):02d}s)"

    return render(), render()


@settings(max_examples=150, deadline=None)
@given(_noisy_line())
def test_two_runs_of_the_same_line_normalise_the_same(pair: tuple[str, str]) -> None:
    first, second = pair
    assert normalise_text(first) == normalise_text(second)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_any_text_normalises_without_error_and_is_stable(text: str) -> None:
    once = normalise_text(text)
    assert isinstance(once, str)
    assert normalise_text(once) == once


def test_result_does_not_depend_on_time_zone_or_locale() -> None:
    line = "2026-11-29T20:18:37Z Nov 29 20:18:37 /tmp/x/y.txt pid=7 took 3.5s"
    code = "from shared.noise import normalise_text; import sys; print(normalise_text(sys.argv[1]))"
    outputs = set()
    for tz, lang, seed in (("UTC", "C", "0"), ("Asia/Kolkata", "de_DE.UTF-8", "123"), ("America/St_Johns", "tr_TR.UTF-8", "7")):
        env = {**os.environ, "TZ": tz, "LANG": lang, "LC_ALL": lang, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", code, line], cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=60
        )
        outputs.add(result.stdout)
    assert outputs == {"<ts> <ts> <tmp>/y.txt pid=<pid> took <dur>\n"}
