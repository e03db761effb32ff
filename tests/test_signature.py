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
    log = "\n".join(["$ npm run size", "Checking bundle", "Bundle is 12 kB over its budget",
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


# --- choosing between lines: one hand-written log per rule that changes the choice -----------------

_TRAVIS_OK = 'The command "{}" exited with 0.'
_TRAVIS_FAIL = 'The command "{}" exited with 1.'

CHOICE_CASES = {
    # A step that reported success printed no root cause, however alarming its lines.
    "survived_step": (
        ["$ (cd ~/.cache/tool && git pull) || git clone https://example.org/tool.git ~/.cache/tool",
         "fatal: not a git repository (or any of the parent directories): .git", "Cloning into '/home/ci/.cache/tool'...",
         _TRAVIS_OK.format("(cd ~/.cache/tool && git pull) || git clone https://example.org/tool.git ~/.cache/tool"),
         "$ ./check-startup.sh", "Loading init.el...", "Startup took 4.2 s, budget is 3 s",
         _TRAVIS_FAIL.format("./check-startup.sh")],
        "generic.last_output", 7),
    # java.lang.X: message in a Scala build is Java's exception (logged by a passing test), not Python's.
    "python_needs_python": (
        ["$ sbt test", "[info] Loading project definition from /build/project",
         "java.lang.IllegalArgumentException: simulated failure for the retry test",
         "[info] - retries a failed request", "[info] - gives up after three attempts *** FAILED ***",
         "[info]   3 was not equal to 2 (RetrySpec.scala:41)", _TRAVIS_FAIL.format("sbt test")],
        "sbt.scalatest", 5),
    # "FAILED:  1 Tests" is a count; Vim's report names the failing test below it.
    "vim_found_errors": (
        ["$ make test", "Executed Test_join_lines() in   0.002100 seconds", "Executed 310 tests in  12.5 seconds",
         "Executed:  310 Tests", "  FAILED:     1 Tests", "", "Failures: ", "\tFrom test_join.vim:",
         "\tFound errors in Test_join_lines():", "\tfunction RunTheTest[40]..Test_join_lines line 4: Expected 'a b' but got 'ab'",
         "TEST FAILURE", "make: *** [report] Error 1", _TRAVIS_FAIL.format("make test")],
        "vim.found_errors", 9),
    # run-tests.php: the verdict line follows the diff; an expected failure (XFAIL) is no error.
    "php_run_tests": (
        ["$ make test", "XFAIL Symlink removal under open_basedir [tests/sec/symlink.phpt]   XFAIL REASON: cannot remove it yet",
         "TEST 120/900 [2/2 concurrent test workers running]", "========DIFF========",
         "003+ string(3) \"abc\"", "003- string(3) \"abd\"", "========DONE========",
         "FAIL Trailing separator is kept [ext/str/tests/trailing.phpt] ", _TRAVIS_FAIL.format("make test")],
        "php.run_tests_fail", 8),
    # GHC prints the position first and the message below; a later step's docker error is a consequence.
    "ghc_error": (
        ['$ docker build -t "app:current" .', "[ 4 of 9] Compiling App.Parser ( src/App/Parser.hs, dist/App/Parser.o )",
         "src/App/Parser.hs:38:10: error:", "    Not in scope: type constructor or class `Semigroup'",
         _TRAVIS_FAIL.format('docker build -t "app:current" .'), '$ docker run "app:current" --version',
         "docker: Error response from daemon: manifest for app:current not found.",
         _TRAVIS_FAIL.format('docker run "app:current" --version')],
        "haskell.ghc", 3),
    # Under -Werror a GHC warning is what failed the build; its message follows on the next lines.
    "ghc_werror": (
        ["$ cabal build --ghc-options=-Werror", "[16 of 40] Compiling App.Notebook ( src/App/Notebook.hs, dist/App/Notebook.o )",
         "", "src/App/Notebook.hs:94:10: Warning:", "    No explicit implementation for", "      ‘mappend’", "",
         "<no location info>: ", "Failing due to -Werror.", _TRAVIS_FAIL.format("cabal build --ghc-options=-Werror")],
        "haskell.ghc_warning", 4),
    "r_tests_failed": (
        ["$ R CMD check app_1.0.tar.gz", "* checking tests ...", "  Running ‘testthat.R’", " ERROR",
         "Running the tests in ‘tests/testthat.R’ failed.", "Last 13 lines of output:",
         "  ── 1. Failure: parses numbers (@test-parser.R#12) ──", "  Error: testthat unit tests failed", "  Execution halted",
         _TRAVIS_FAIL.format("R CMD check app_1.0.tar.gz")],
        "r.tests_failed", 5),
    # "* checking X ... ERROR" heads the line that says what is wrong.
    "r_check_header": (
        ["$ R CMD check app_1.0.tar.gz", "* checking package dependencies ... ERROR",
         "Namespace dependency not required: ‘jsonlite’", "", "See section ‘The DESCRIPTION file’ in the manual.",
         _TRAVIS_FAIL.format("R CMD check app_1.0.tar.gz")],
        "r.check_error", 3),
    # Emacs: the header hands over to the backtrace's first frame, which repeats the error.
    "emacs_backtrace": (
        ["$ emacs --batch -l init.el", "Loading /build/init.el (source)...",
         "Couldn't install optional package `ido-extra': (error \"Package `emacs-27.1' is unavailable\")",
         "Debugger entered--Lisp error: (void-function string-trim-left)", "  (string-trim-left \" x\")",
         "  eval-buffer(#<buffer  *load*> nil \"/build/init.el\" nil t)", _TRAVIS_FAIL.format("emacs --batch -l init.el")],
        "emacs.lisp_error", 5),
    # Mocha prints the failure number alone when the title runs long; the count is only a summary.
    # A backtrace whose header was cut off still starts with the frame that signalled.
    "emacs_signal_frame": (
        ["$ emacs --batch -l init.el", "Loading /build/init.el (source)...", "Failed to download ‘melpa’ archive.", "...",
         "  signal(error (\"No version of ido-extra >= nil is available\"))",
         "  error(\"No version of %s >= %S is available\" ido-extra nil)", _TRAVIS_FAIL.format("emacs --batch -l init.el")],
        "emacs.signal_frame", 5),
    "mocha_number_alone": (
        ["$ mocha test/", "  2 passing (40ms)", "  1 failing", "", "  1)", "", "       unittests:: program reuse",
         "         rebuilds when a reference changes:", "     AssertionError: expected 1 to equal 2",
         _TRAVIS_FAIL.format("mocha test/")],
        "mocha.number_alone", 5),
    "karma_test": (
        ["$ karma start --single-run", "Firefox 60.0.0 (Linux 0.0.0) parser rejects empty input FAILED",
         "\tExpected function to throw an Error.", "Firefox 60.0.0 (Linux 0.0.0): Executed 40 of 40 (1 FAILED) (0.4 secs)",
         _TRAVIS_FAIL.format("karma start --single-run")],
        "karma.browser", 2),
    # sbt-mima: each problem line says what broke compatibility; the summary only says that it did.
    "mima_problem": (
        ["$ sbt mimaReportBinaryIssues", "[info] Loading settings for project app",
         "[error] app: Failed binary compatibility check against app:1.0.0! Found 1 potential problems",
         "[error]  * method parse(java.lang.String)Int in object app.Parser does not have a correspondent in current version",
         "[error]    filter with: ProblemFilters.exclude[DirectMissingMethodProblem](\"app.Parser.parse\")",
         "[error] java.lang.RuntimeException: app: Binary compatibility check failed!",
         _TRAVIS_FAIL.format("sbt mimaReportBinaryIssues")],
        "sbt.mima", 4),
    "xcode_compile": (
        ["$ xcodebuild test -scheme App", "xcodebuild: error: Unable to find a destination matching the provided destination specifier:",
         "▸ Compiling Parser.swift", "❌  /src/App/Parser.swift:97:2: unknown attribute 'memberwise'",
         "** TEST FAILED **", _TRAVIS_FAIL.format("xcodebuild test -scheme App")],
        "generic.xcode_error", 4),
    "limit_exceeded": (
        ["$ npm run size", "  Package size limit has exceeded by 1.2 KB", "  Size limit:   10 KB",
         "  Package size: 11.2 KB with all dependencies", "  Try to reduce size or increase limit", _TRAVIS_FAIL.format("npm run size")],
        "generic.limit_exceeded", 2),
    # Test runners indent the exception under the test's title.
    "indented_exception": (
        ["$ cake test", "failed 1 and passed 310 tests", "  Parser handles empty input",
         "    AssertionError: expected '' to equal 'x'", "      at eq (test/support/helpers.coffee:1:1)",
         _TRAVIS_FAIL.format("cake test")],
        "generic.exception_line", 4),
    # name, padding, verdict: a test runner's result column.
    "status_column": (
        ["$ make test", "motions/word-forward                  PASS", "motions/word-backward                 FAIL",
         "Tests ok 1/2", _TRAVIS_FAIL.format("make test")],
        "generic.status_column", 3),
    # A result line that says OK explains nothing, error words or not.
    "passed_line": (
        ["$ stack test", "  options", "    unknown option rejected:                 OK (0.01s)",
         "    tables:                                  FAIL (0.06s)", "      --- tables.expected", "      +++ tables.actual",
         _TRAVIS_FAIL.format("stack test")],
        "generic.status_column", 4),
    "rspec_load_error": (
        ["$ bundle exec rspec", "An error occurred while loading ./spec/models/user_spec.rb.",
         "Failure/Error: require 'rails_helper'", "SyntaxError:", "  unexpected end-of-input, expecting end",
         "No examples found.", _TRAVIS_FAIL.format("bundle exec rspec")],
        "ruby.rspec_load", 2),
    # Latexmk's summary lists warnings; the check that failed printed the last lines.
    "latexmk_warning": (
        ['$ latexmk -pdf std; ! grep -e "Overfull" std.log', "Latexmk: Summary of warnings:",
         "  Latex failed to resolve 12 reference(s)", "Overfull \\hbox (19.6pt too wide) in paragraph at lines 7256--7268",
         _TRAVIS_FAIL.format('latexmk -pdf std; ! grep -e "Overfull" std.log')],
        "generic.last_output", 4),
    "purescript_error": (
        ["$ purs compile src/**/*.purs", "[1 of 3] Compiling Data.Parser", "Error found:", "in module Data.Parser",
         "at src/Data/Parser.purs:6:1 - 6:28 (line 6, column 1 - line 6, column 28)", "",
         "  Module Data.Tokens was not found.", _TRAVIS_FAIL.format("purs compile src/**/*.purs")],
        "purescript.error", 3),
    # Erlang: the Common Test verdict, not a logger line at [error] level from the system under test.
    "erlang_ct": (
        ["$ make ct", "22:07:01.104 [error] Error in process <0.1364.0> on node 'ct@localhost' with exit value:",
         "{badarg,[{erlang,binary_to_term,[<<>>],[]}]}", "%%% parser_SUITE ==> parses_numbers: FAILED",
         "parser_SUITE:parses_numbers failed on line 42", "Reason: {badmatch,{error,timeout}}", _TRAVIS_FAIL.format("make ct")],
        "erlang.ct_failed", 5),
    # Erlang compile errors; a warning at a position is no error.
    "erlang_compile": (
        ["$ make", "test/fixture_helper.erl:3: Warning: behaviour gen_fixture undefined",
         "Could not find Hex, which is needed to build dependency :json",
         "src/app_parser.erl:91: field tokens undefined in record state", _TRAVIS_FAIL.format("make")],
        "erlang.compile", 4),
    "markdownlint_spaced": (
        ["$ markdownlint pages/", "pages/common/tar.md: 10: MD007/ul-indent Unordered list indentation [Expected: 4; Actual: 1]",
         "/home/ci/.ci/functions: line 104: test_result: No such file or directory", _TRAVIS_FAIL.format("markdownlint pages/")],
        "lint.markdownlint", 2),
    "vader_failed": (
        ["$ test/run", "Starting Vader: test/workflow.vader", "    ( 1/3) [EXECUTE] installs plugins",
         "    ( 2/3) [EXECUTE] (X) updates a pinned plugin", "      (X) Assertion failure", "/bin/bash: no-such-cmd: command not found",
         "  Success/Total: 2/3", _TRAVIS_FAIL.format("test/run")],
        "vim.vader_failed", 4),
    # sbt's test totals are a consequence; partest's "# Failed test paths" is no Perl test failure.
    "sbt_totals": (
        ["$ sbt test", "[info] Loading project definition from /build/project", "!!  12 - neg/t742.scala   [compilation failed]",
         "##### Log file '/build/test/files/neg/t742-neg.log' from failed test #####", "", "error: head of empty list", "",
         "# Failed test paths (this command will update checkfiles)", "partest --update-check \\",
         "[error] Failed: Total 40, Failed 1, Errors 0, Passed 39", "[error] Failed tests:", _TRAVIS_FAIL.format("sbt test")],
        "generic.error_prefix", 6),
    "cobra_usage": (
        ["$ docker build -t :current .", "invalid argument \":current\" for \"-t, --tag\" flag: invalid reference format",
         "See 'docker build --help'.", _TRAVIS_FAIL.format("docker build -t :current .")],
        "generic.usage_error", 2),
    "webpack": (
        ["$ npm run build", "> app@1.0.0 build /build", "> webpack", "Hash: 4b1e5c0f2a", "ERROR in ./src/app.js",
         "Module not found: Error: Can't resolve './parser' in '/build/src'", " @ ./src/index.js 3:0-28",
         "npm ERR! code ELIFECYCLE", _TRAVIS_FAIL.format("npm run build")],
        "node.webpack_resolve", 6),
    # The failed step's own error wins over what an earlier step that went on printed.
    "gulp": (
        ["$ npm ls", "npm ERR! missing: left-pad@1.3.0, required by app@1.0.0", "$ gulp",
         "[02:22:53] Using gulpfile ~/build/app/gulpfile.js", "[02:22:53] Task never defined: default",
         "[02:22:53] To list available tasks, try running: gulp --tasks", _TRAVIS_FAIL.format("gulp")],
        "node.gulp_task", 5),
    "ctest": (
        ["$ ctest --output-on-failure", "Test project /build", "1/2 Test #1: lexer_test .......   Passed    0.01 sec",
         "2/2 Test #2: parser_test ......***Failed    0.02 sec", "50% tests passed, 1 tests failed out of 2",
         "The following tests FAILED:", "\t  2 - parser_test (Failed)", "Errors while running CTest",
         _TRAVIS_FAIL.format("ctest --output-on-failure")],
        "make.ctest_failed", 7),
    "nunit": (
        ["$ mono nunit3-console.exe App.Tests.dll", "Errors, Failures and Warnings", "",
         "1) Failed : App.Tests.ParserTests.RejectsEmptyInput", "  Expected: 1", "  But was:  0",
         "Test Run Summary", "  Overall result: Failed", _TRAVIS_FAIL.format("mono nunit3-console.exe App.Tests.dll")],
        "dotnet.nunit", 4),
    "gtest": (
        ["$ ./parser_tests", "[==========] Running 2 tests from 1 test suite.", "[ RUN      ] ParserTest.Accepts",
         "[       OK ] ParserTest.Accepts (0 ms)", "[ RUN      ] ParserTest.RejectsEmptyInput", "test/parser_test.cc:42: Failure",
         "Expected equality of these values:", "[  FAILED  ] ParserTest.RejectsEmptyInput (1 ms)", "[  FAILED  ] 1 test, listed below:",
         _TRAVIS_FAIL.format("./parser_tests")],
        "gtest.failure", 6),
    "busted": (
        ["$ busted spec", "●●◼", "2 successes / 1 failure / 0 errors / 0 pending : 0.01 seconds", "",
         "Failure → spec/parser_spec.lua @ 12", "parser rejects empty input", "spec/parser_spec.lua:14: Expected objects to be the same.",
         _TRAVIS_FAIL.format("busted spec")],
        "lua.busted", 5),
    "clojure_test": (
        ["$ lein test", "lein test app.parser-test", "", "FAIL in (parses-numbers) (parser_test.clj:12)",
         "expected: (= 3 (parse \"3\"))", "  actual: (not (= 3 nil))", "", "Ran 4 tests containing 9 assertions.", "1 failures, 0 errors.",
         "Tests failed.", _TRAVIS_FAIL.format("lein test")],
        "clojure.test_failed", 4),
    "tap_bail_out": (
        ["$ prove -r t/", "t/00-load.t .. ok", "Bail out!  Cannot connect to the test database", "FAILED--Further testing stopped.",
         _TRAVIS_FAIL.format("prove -r t/")],
        "tap.bail_out", 3),
    "ruby_exception": (
        ["$ bundle exec rake", "Could not open cache file, rebuilding",
         "lib/app/parser.rb:12:in `parse': undefined method `strip' for nil:NilClass (NoMethodError)",
         "\tfrom bin/app:3:in `<main>'", _TRAVIS_FAIL.format("bundle exec rake")],
        "ruby.exception", 3),
    # tsc --pretty: "file:line:col - error TSnnnn: message"; npm's lines after it are consequences.
    "tsc_pretty": (
        ["$ npm run build", "> tsc -p .", "src/parser.ts:12:5 - error TS2322: Type 'string' is not assignable to type 'number'.",
         "Found 1 error.", "npm ERR! code ELIFECYCLE", "npm ERR! errno 2", _TRAVIS_FAIL.format("npm run build")],
        "node.tsc", 3),
    "killed": (
        ["$ ./run-tests.sh", "Running 1200 tests", "./run-tests.sh: line 12:  4242 Killed                  ./test-runner --all",
         _TRAVIS_FAIL.format("./run-tests.sh")],
        "generic.crash", 3),
    "shell_syntax": (
        ["$ ./ci/build.sh", "Building", "./ci/build.sh: line 12: syntax error near unexpected token `fi'", "./ci/build.sh: line 12: `fi'",
         _TRAVIS_FAIL.format("./ci/build.sh")],
        "generic.shell_syntax", 3),
    # git could not fetch what the build needs: the "No such file" lines after it are consequences.
    "git_remote": (
        ["$ git clone --depth 1 https://example.org/deps/lexer.git && cd lexer && make", "Cloning into 'lexer'...",
         "fatal: unable to access 'https://example.org/deps/lexer.git/': Could not resolve host: example.org",
         "/home/ci/.ci/job_stages: line 80: cd: lexer: No such file or directory",
         _TRAVIS_FAIL.format("git clone --depth 1 https://example.org/deps/lexer.git && cd lexer && make")],
        "generic.git_remote", 3),
    # rake's "Command failed with status (1)" after "rake aborted!" is its verdict on a shell command
    # whose own output said what went wrong; the header hands its weight to nothing.
    "rake_command_failed": (
        ["$ bundle exec rake qunit:test", "Running 310 browser tests", "Tests timed out after 900 s", "rake aborted!",
         "Command failed with status (124): [node test/run-qunit.js http://localhost:6000/q...]",
         "/home/ci/app/lib/tasks/qunit.rake:40:in `block in <main>'", _TRAVIS_FAIL.format("bundle exec rake qunit:test")],
        "generic.timeout", 3),
    # TAP's YAML block under "not ok" says why the test failed: its first line is shown.
    "tap_yaml_block": (
        ["$ node test/rules.js", "TAP version 13", "# keeps imports first", "ok 1 no warnings", "not ok 2 no errors", "  ---",
         "    operator: equal", "    expected: 0", "    actual:   2", "  ...", "", "1..2", "# tests 2", "# fail  1",
         _TRAVIS_FAIL.format("node test/rules.js")],
        "tap.not_ok", 7),
    # Composer's verdict heads its problems; the problem's "- ..." line names the package that could not be had.
    "composer_problem": (
        ["$ composer update --no-progress", "Loading composer repositories with package information",
         "Updating dependencies (including require-dev)",
         "Your requirements could not be resolved to an installable set of packages.", "", "  Problem 1",
         "    - The requested package acme/parser-bridge 2.1@dev exists as acme/parser-bridge[1.0.x-dev, 1.1.x-dev]"
         " but these are rejected by your constraint.", "", _TRAVIS_FAIL.format("composer update --no-progress")],
        "php.composer_problem", 7),
    # PHPStan's findings table: the file's header row opens what its "[ERROR] Found 1 error" only counts.
    "phpstan_table": (
        ["$ vendor/bin/phpstan analyse src", " 12/12 [============================] 100%", "",
         " ------ ---------------------------------------------- ", "  Line   src/Parser/Lexer.php                           ",
         " ------ ---------------------------------------------- ", "  88     Method Lexer::peek() should return string but returns int. ",
         " ------ ---------------------------------------------- ", "", " [ERROR] Found 1 error ", "",
         _TRAVIS_FAIL.format("vendor/bin/phpstan analyse src")],
        "php.phpstan_file", 5),
    # xcpretty repeats each failure in its summary, under the class, above the file and line: shown there.
    "xcpretty_summary": (
        ["$ xcodebuild test -scheme Parser | xcpretty", "▸ Building Parser/Parser [Debug]", "ParserTests",
         "    ✓ testParsesNumbers (0.002 seconds)",
         "    ✗ testParseEmptyInput, XCTAssertEqual failed: (\"0\") is not equal to (\"1\")", "", "",
         "ParserTests.ParserTests", "  testParseEmptyInput, XCTAssertEqual failed: (\"0\") is not equal to (\"1\")",
         "  /Users/ci/build/Parser/Tests/ParserTests.swift:31", "  ```", "        XCTAssertEqual(parse(\"\").count, 1)", "  ```", "",
         "\t Executed 2 tests, with 1 failure (0 unexpected) in 0.010 (0.012) seconds",
         _TRAVIS_FAIL.format("xcodebuild test -scheme Parser | xcpretty")],
        "xcode.xcpretty_summary", 9),
}


@pytest.mark.parametrize("case", sorted(CHOICE_CASES))
def test_rules_choose_the_explaining_line(case: str) -> None:
    lines, rule, line = CHOICE_CASES[case]
    sig = extract_signature("\n".join(lines))
    assert (sig.rule, sig.matched_line) == (rule, line), sig.raw


def test_a_position_line_signs_with_its_message() -> None:
    head = ["$ cabal build", "[ 4 of 9] Compiling App.Parser ( src/App/Parser.hs, dist/App/Parser.o )", "src/App/Parser.hs:38:10: error:"]
    first = extract_signature("\n".join([*head, "    Variable not in scope: tokens", "cabal: Failed to build app"]))
    second = extract_signature("\n".join([*head, "    Not in scope: type constructor or class `Semigroup'", "cabal: Failed to build app"]))
    assert first.rule == second.rule == "haskell.ghc" and first.matched_line == second.matched_line == 3
    assert "Variable not in scope: tokens" in first.normalised
    assert first.sig_sha != second.sig_sha


def test_a_phpstan_table_signs_with_its_file_and_first_finding() -> None:
    lines, _, _ = CHOICE_CASES["phpstan_table"]
    first = extract_signature("\n".join(lines))
    other = [line.replace("Method Lexer::peek() should return string but returns int.",
                          "Access to an undefined property Lexer::$pos.") for line in lines]
    second = extract_signature("\n".join(other))
    assert first.rule == second.rule == "php.phpstan_file" and first.matched_line == second.matched_line == 5
    # The rule line between the header and the finding is skipped: the finding is what tells them apart.
    assert "should return string but returns int" in first.normalised and "---" not in first.normalised
    assert first.sig_sha != second.sig_sha


def test_a_tap_failure_signs_with_its_header_and_shows_its_yaml_block() -> None:
    lines, _, _ = CHOICE_CASES["tap_yaml_block"]
    sig = extract_signature("\n".join(lines))
    assert sig.raw == "    operator: equal" and "not ok 2 no errors" in sig.context
    assert sig.normalised == "not ok 2 no errors operator: equal"
    # Without a YAML block the "not ok" line itself is shown.
    bare = extract_signature("\n".join(["$ node test/rules.js", "ok 1 no warnings", "not ok 2 no errors", "ok 3 sorted",
                                        _TRAVIS_FAIL.format("node test/rules.js")]))
    assert (bare.rule, bare.matched_line, bare.normalised) == ("tap.not_ok", 3, "not ok 2 no errors")


def test_pass_lines_are_no_error_lines() -> None:
    assert classify_line("auto", "    unknown option rejected:          OK (0.02s)") is None
    assert classify_line("auto", "XFAIL Symlink removal [tests/sec/symlink.phpt]   XFAIL REASON: cannot remove it yet") is None
    assert classify_line("auto", "FAIL Trailing separator is kept [ext/str/tests/trailing.phpt]") == "php.run_tests_fail"
    assert classify_line("auto", "  Failed:     0 Tests") != "generic.fail_prefix"  # a count, not a message
    assert classify_line("auto", "FAIL: test_parse_empty (tests.test_parser.ParserTest)") == "python.unittest"
