"""Failure signatures of CI logs: the right line, stable across runs, safe on bad input."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli.sig  # noqa: F401  (attaches ``mem sig``)
from cli.app import mem
from shared.diagnosis import (
    KNOWN_TOOLS,
    UnknownToolError,
    classify_line,
    detect_tool,
    extract_signature,
    sig_sha,
)
from shared.diagnosis.classify import hint_keys, is_anchored
from shared.diagnosis.lines import MAX_LINE_CHARS, iter_lines
from shared.diagnosis.rules import TOOL_TABLES

REPO = Path(__file__).resolve().parent.parent
LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"


def _log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fixture", "tool", "rule", "line", "words"),
    [
        ("npm_eresolve.log", "npm", "npm.message", 5, "ERESOLVE unable to resolve dependency tree"),
        ("jest_fail.log", "jest", "jest.test_header", 4, "applies the spring coupon"),
        ("cargo_error.log", "cargo", "cargo.error_code", 4, "error[E0308]: mismatched types"),
        ("go_test_fail.log", "go", "go.subtest_fail", 10, "TestInvoiceTotal/two_lines"),
        ("pytest_fail.log", "pytest", "pytest.e_line", 14, "assert 20015 == 20016"),
        ("python_traceback.log", "python", "python.exception", 9, "psycopg.OperationalError"),
        ("pip_resolve.log", "pip", "pip.resolve", 5, "numpy==3.9.0"),
        ("maven_compile.log", "maven", "maven.compile", 8, "cannot find symbol"),
        ("gradle_test.log", "gradle", "gradle.test_failed", 5, "RouteTest > shortestPathAvoidsToll FAILED"),
        ("make_gcc.log", "gcc", "gcc.compile", 5, "implicit declaration of function 'parse_headers'"),
        ("docker_build.log", "npm", "npm.message", 9, "404 Not Found"),
        ("kubectl_apply.log", "kubectl", "kubectl.server", 4, "exceeded quota"),
        ("k8s_events.log", "kubernetes", "kubernetes.root_event", 8, "FailedScheduling"),
        ("terraform_plan.log", "terraform", "terraform.error", 5, "Reference to undeclared resource"),
        ("helm_upgrade.log", "helm", "helm.install", 3, "INSTALLATION FAILED"),
        ("generic_script.log", "generic", "generic.not_found", 4, "aws: command not found"),
    ],
)
def test_the_line_that_explains_the_failure_is_chosen(fixture: str, tool: str, rule: str, line: int, words: str) -> None:
    sig = extract_signature(_log(fixture))
    assert sig.found
    assert (sig.tool, sig.rule, sig.matched_line) == (tool, rule, line)
    assert words in sig.normalised
    assert sig.sig_sha == sig_sha(tool, sig.normalised)
    assert sig.raw in _log(fixture).splitlines()[line - 1]
    assert 0 < sig.confidence <= 1


@pytest.mark.parametrize(
    ("fixture", "not_this"),
    [
        ("npm_eresolve.log", "A complete log of this run"),
        ("cargo_error.log", "could not compile"),
        ("make_gcc.log", "make: ***"),
        ("npm_eresolve.log", "Process completed with exit code"),
        ("python_traceback.log", "django.db.utils.OperationalError"),  # the repeated, chained exception
        ("docker_build.log", "failed to solve"),
    ],
)
def test_consequences_are_not_the_root_cause(fixture: str, not_this: str) -> None:
    assert not_this not in extract_signature(_log(fixture)).raw


def test_a_log_without_a_recognisable_error_has_no_signature() -> None:
    sig = extract_signature(_log("passing.log"))
    assert not sig.found
    assert sig.sig_sha is None and sig.raw is None and sig.matched_line is None


def test_two_runs_of_the_same_failure_share_the_signature() -> None:
    first = extract_signature(_log("npm_eresolve.log"))
    second = extract_signature(_log("npm_eresolve_run2.log"))
    assert first.sig_sha == second.sig_sha
    assert first.raw != second.raw  # the timestamps differ, the signature does not


def test_different_failures_have_different_signatures() -> None:
    shas = {extract_signature(path.read_text(encoding="utf-8")).sig_sha for path in LOGS.glob("*.log")}
    # every fixture is a different failure except the two npm runs and the passing log (no signature)
    assert len(shas - {None}) == len(list(LOGS.glob("*.log"))) - 2


def test_the_tool_is_part_of_the_identity() -> None:
    log = _log("cargo_error.log")
    assert extract_signature(log, "cargo").sig_sha != extract_signature(log, "generic").sig_sha


def test_a_named_tool_is_used_for_the_identity_and_aliases_resolve() -> None:
    assert extract_signature(_log("cargo_error.log"), "rustc").tool == "cargo"


def test_context_and_errors_are_reported() -> None:
    sig = extract_signature(_log("make_gcc.log"))
    assert sig.context[2] == "src/server.c:88:9: error: implicit declaration of function 'parse_headers' [-Werror=implicit-function-declaration]"
    assert len(sig.context) == 6
    data = sig.to_dict()
    assert json.loads(json.dumps(data)) == data
    maven = extract_signature(_log("maven_compile.log"))
    assert any("Failed to execute goal" in e.text for e in maven.errors)
    assert all(e.line != maven.matched_line for e in maven.errors)


def test_errors_are_capped() -> None:
    log = "\n".join(f"src/m{i}.c:{i}:1: error: unknown type name 't{i}'" for i in range(500))
    sig = extract_signature(log, max_errors=20)
    assert sig.matched_line == 1
    assert len(sig.errors) == 20


def test_the_first_of_repeated_errors_is_shown() -> None:
    log = "\n".join(["$ make test", "t.c:3:1: error: boom", "The command \"make test\" exited with 0.",
                     "$ make test", "t.c:3:1: error: boom", "The command \"make test\" exited with 2."])
    assert extract_signature(log).matched_line == 2


def test_a_failed_step_without_error_words_points_at_its_last_output() -> None:
    log = "\n".join(["$ npm run size", "Checking bundle", "Package size limit has exceeded by 12 kB",
                     "The command \"npm run size\" exited with 1."])
    sig = extract_signature(log)
    assert (sig.rule, sig.matched_line) == ("generic.last_output", 3)


def test_header_lines_point_at_the_next_line() -> None:
    log = "\n".join(["$ rake", "rake aborted!", "No Rakefile found (looking for: rakefile, Rakefile)",
                     "The command \"rake\" exited with 1."])
    sig = extract_signature(log)
    assert (sig.rule, sig.matched_line) == ("ruby.rake_aborted", 3)


def test_detect_tool() -> None:
    assert detect_tool(_log("pytest_fail.log")) == "pytest"
    assert detect_tool(_log("maven_compile.log")) == "maven"
    assert detect_tool("nothing to see here\n") == "generic"


def test_classify_line_names_error_failure_summary_and_exit_lines() -> None:
    assert classify_line("auto", "error[E0308]: mismatched types") == "cargo.error_code"
    assert classify_line("auto", "--- FAIL: TestParse (0.00s)") == "go.test_fail"
    assert classify_line("auto", "Tests:       1 failed, 4 passed, 5 total") == "jest.summary"
    assert classify_line("auto", "make: *** [Makefile:12: all] Error 2") == "make.recipe"
    assert classify_line("auto", "npm ERR! A complete log of this run can be found in: x") is None  # cascade
    assert classify_line("auto", "Compiling serde v1.0.197") is None
    assert classify_line("npm", "\x1b[31mnpm ERR!\x1b[0m code E404") == "npm.code"


def test_every_rule_matches_its_example_through_its_hint() -> None:
    for table in TOOL_TABLES:
        for rule in table.rules:
            probe = f"\n{rule.example.lower()}\n"
            keys = [key for hint in rule.hint.split("|") if hint for key in hint_keys(hint)]
            assert keys, f"{rule.name} has no hint"
            assert any(key in probe for key in keys), f"{rule.name}: hint {rule.hint!r} not in its example"
            matcher = rule.pattern.match if is_anchored(rule.pattern) else rule.pattern.search
            assert matcher(rule.example), f"{rule.name} does not match its example"
        for marker in table.markers:
            assert marker.hint, f"a marker of {table.tool} has no hint"


def test_sig_sha_is_identical_under_other_hash_seeds_time_zones_and_locales() -> None:
    code = (
        "import sys; from shared.diagnosis import extract_signature;"
        "print(extract_signature(open(sys.argv[1], encoding='utf-8').read()).sig_sha)"
    )
    outputs = set()
    for tz, lang, seed in (("UTC", "C", "0"), ("Pacific/Chatham", "fr_FR.UTF-8", "4242")):
        env = {**os.environ, "TZ": tz, "LANG": lang, "LC_ALL": lang, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", code, str(LOGS / "pytest_fail.log")],
            cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=60,
        )
        outputs.add(result.stdout.strip())
    assert outputs == {extract_signature(_log("pytest_fail.log")).sig_sha}


# --- bad input --------------------------------------------------------------------------------------


def test_empty_input() -> None:
    assert not extract_signature("").found
    assert not extract_signature([]).found
    assert extract_signature("").lines_read == 0


def test_unknown_tool_is_a_clear_error_listing_known_tools() -> None:
    with pytest.raises(UnknownToolError) as excinfo:
        extract_signature("x", "nosuchtool")
    assert "npm" in str(excinfo.value) and "cargo" in str(excinfo.value)
    assert set(KNOWN_TOOLS) >= {"npm", "cargo", "go", "pytest", "pip", "maven", "gradle", "make", "gcc", "docker",
                                "kubectl", "kubernetes", "terraform", "helm", "generic"}


def test_binary_and_invalid_utf8_input_decodes_with_replacement() -> None:
    data = bytes(range(256)) * 40 + b"\nerror[E0308]: mismatched \xff\xfe types\n" + b"\x00\x01\x02" * 100
    sig = extract_signature(iter_lines(io.BytesIO(data)))
    assert sig.found and sig.rule == "cargo.error_code"
    assert "\ufffd" in sig.raw


class _EndlessLine(io.RawIOBase):
    """A stream of ``size`` bytes without a single newline (the worst case for a line reader)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = b"x" * n
        self.left -= n
        return n


def test_huge_input_is_streamed_with_bounded_memory() -> None:
    stream = io.BufferedReader(_EndlessLine(64 * 1024 * 1024), buffer_size=1 << 20)
    tracemalloc.start()
    try:
        sig = extract_signature(iter_lines(stream))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not sig.found and sig.lines_read == 1
    assert peak < 16 * 1024 * 1024  # a 64 MB line never sits in memory


def test_long_lines_are_cut() -> None:
    lines = list(iter_lines(io.BytesIO(b"a" * (MAX_LINE_CHARS * 3) + b"\nshort\n")))
    assert [len(line) for line in lines] == [MAX_LINE_CHARS, 5]


def test_many_lines_stream_lazily() -> None:
    def generate() -> Iterator[str]:
        for i in range(200_000):
            yield f"step {i} ok\n"
        yield "FATAL: disk quota exceeded\n"

    sig = extract_signature(generate())
    assert sig.matched_line == 200_001 and sig.found


# --- mem sig ----------------------------------------------------------------------------------------


def test_cli_prints_one_json_object_for_one_log() -> None:
    result = CliRunner().invoke(mem, ["sig", "--file", str(LOGS / "cargo_error.log")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= {"tool", "raw", "normalised", "sig_sha", "rule", "confidence", "matched_line", "context", "errors"}
    assert data["tool"] == "cargo"


def test_cli_prints_one_json_line_per_file() -> None:
    files = ["npm_eresolve.log", "go_test_fail.log"]
    args = ["sig"] + [arg for name in files for arg in ("--file", str(LOGS / name))]
    result = CliRunner().invoke(mem, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [row["tool"] for row in rows] == ["npm", "go"]
    assert rows[0]["file"].endswith("npm_eresolve.log")


def test_cli_reads_stdin_and_exits_1_without_a_signature() -> None:
    result = CliRunner().invoke(mem, ["sig", "--json"], input=_log("passing.log"))
    assert result.exit_code == 1
    assert json.loads(result.output)["found"] is False


def test_cli_reads_binary_stdin() -> None:
    result = CliRunner().invoke(mem, ["sig"], input=b"\xff\xfe\x00garbage\nfatal: not a git repository\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["matched_line"] == 2


def test_cli_unknown_tool_lists_known_tools() -> None:
    result = CliRunner().invoke(mem, ["sig", "--tool", "nosuchtool"], input="x")
    assert result.exit_code == 2
    assert "unknown tool" in result.output and re.search(r"known tools: auto, npm", result.output)
