"""Tool rule tables: which log lines explain a failure, as data (one table per tool).

Every rule is matched against a line's *body*: the line with ANSI codes, carriage-return overwrites,
timestamps and log-level prefixes removed (see :mod:`shared.diagnosis.lines`). Rules with
``field="text"`` see the line before the log-level prefix is removed.

Kinds:

- ``error``: a root-cause candidate (a compiler error, an exception, ``npm ERR! code E404``);
- ``failure``: a test or step failure header (``--- FAIL: TestX``, ``FooTest > bar FAILED``);
- ``summary``: a roll-up that says something failed (``Tests: 1 failed``, ``BUILD FAILURE``);
- ``exit``: an exit-code line (``Process completed with exit code 1``, ``make: *** [all] Error 2``);
- ``cascade``: a consequence or boiler-plate line that never explains anything (``A complete log of
  this run can be found in``, ``could not compile due to previous error``);
- ``pass``: a line that reports success although it holds error words (``unknown option:   OK``, an
  expected failure): it is no error line at all, as if no rule matched it (lighter rules included).

Only error, failure and summary lines can become the signature; ``weight`` (0-100) says how well
the line explains the failure (the heaviest matching rule classifies a line). ``hint`` lists
lower-case substrings separated by ``|``, one of which every match contains (``^x``: at the start of
the line, ``x$``: at its end): a line is only tried against the rules whose hint it contains (found
for all rules at once with Aho-Corasick), which keeps extraction fast. For ties between rules of the
same weight, the earlier table wins. Cascade and exit rules weigh 100 so that they override (the
loose generic ``exit_code`` and the info-level rules weigh less, so real errors still win). ``needs_marker`` rules are generic-looking (``Error: ...``) and only count as their
tool's when that tool was named or its markers were seen earlier in the log. ``points_next`` rules
are headers ("rake aborted!", "* What went wrong:") whose next non-blank line says what went wrong:
that line becomes the candidate, with the header's rule and weight. ``with_next`` rules are positions
whose message follows on the next line (GHC's ``src/X.hs:3:1: error:``): the line is the candidate and
its signature text reads the next non-blank line too. ``block_below`` rules are failure headers whose
indented block below says why (TAP's ``not ok 3`` then its YAML ``---`` block): the block's first line
with a word is the line shown, and the signature text reads the header and that line. ``step_ok``
rules are a CI step reporting success (``The command "x" exited with 0.``): what that step printed
did not fail the job.

Each rule carries an ``example`` line written for this project; the tests check that every rule
matches its example, so the tables document themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

RuleKind = Literal["error", "failure", "summary", "exit", "cascade", "pass"]
CANDIDATE_KINDS: frozenset[str] = frozenset({"error", "failure", "summary"})


@dataclass(frozen=True)
class Rule:
    """One kind of line a tool prints when something goes wrong."""

    name: str
    pattern: re.Pattern[str]
    kind: RuleKind
    weight: int
    hint: str
    example: str
    field: Literal["body", "text"] = "body"
    needs_marker: bool = False
    points_next: bool = False
    step_ok: bool = False
    with_next: bool = False
    block_below: bool = False


@dataclass(frozen=True)
class Marker:
    """A line that shows a tool ran (``npm WARN``, ``Compiling foo v1.0``); ``hint`` as for rules."""

    pattern: re.Pattern[str]
    hint: str


@dataclass(frozen=True)
class ToolRules:
    """The table of one tool: lines that show it ran (markers) and lines that explain a failure."""

    tool: str
    markers: tuple[Marker, ...]
    rules: tuple[Rule, ...]


def _rule(
    tool: str,
    name: str,
    pattern: str,
    *,
    kind: RuleKind = "error",
    weight: int = 80,
    hint: str,
    example: str,
    field: Literal["body", "text"] = "body",
    needs_marker: bool = False,
    points_next: bool = False,
    step_ok: bool = False,
    with_next: bool = False,
    block_below: bool = False,
) -> Rule:
    return Rule(
        f"{tool}.{name}", re.compile(pattern), kind, weight, hint, example, field, needs_marker, points_next, step_ok, with_next,
        block_below,
    )


def _table(
    tool: str, markers: tuple[tuple[str, str], ...], rules: list[tuple[str, str, dict[str, object]]]
) -> ToolRules:
    return ToolRules(
        tool,
        tuple(Marker(re.compile(pattern), hint) for hint, pattern in markers),
        tuple(_rule(tool, name, pattern, **options) for name, pattern, options in rules),  # type: ignore[arg-type]
    )


def _o(**options: object) -> dict[str, object]:
    return options


# "1) " to "9) " at line start, indented by up to four blanks: the numbered failure lists of mocha and
# rspec/minitest (the hint keys are literals; the rule's pattern decides).
_NUMBERED_HINT = "|".join(f"^{' ' * indent}{number}) " for number in range(1, 10) for indent in range(5))

# --------------------------------------------------------------------------------------------------
# The tables. Weights: 90+ a specific root cause with its message; 80-89 a specific failure; 60-79
# a tool's generic error line; 30-59 summaries and generic errors; < 30 weak evidence (only counts
# when the log also shows a failing exit code).
# --------------------------------------------------------------------------------------------------

NPM = _table(
    "npm",
    (('npm ', r"^npm (?:ERR!|WARN|notice|info|error|warn) "), ('npm ', r"^(?:\$ )?npm (?:ci|install|test|run)\b"),
     ('added ', r"^added \d+ packages?")),
    [
        ("err_cascade",
         r"^npm (?:ERR!|error) (?:A complete log of this run|Test failed\.\s+See above|This is probably not a problem with npm|"
         r"Failed at the |Exit status \d|errno |syscall |path |command (?:failed|sh )|workspace |location |"
         r"Tell the author|You can get information|Make sure you have|Please include|Log files were not written|"
         r"\s*$|[\w@/.-]+@\S+ [\w:-]+: )",
         _o(kind="cascade", weight=100, hint="npm ", example="npm ERR! A complete log of this run can be found in: x.log")),
        ("lifecycle", r"^npm (?:ERR!|error) code (?:ELIFECYCLE|\d+)\s*$",
         _o(kind="exit", weight=100, hint="npm ", example="npm ERR! code ELIFECYCLE")),
        ("code", r"^npm (?:ERR!|error) code (E[A-Z0-9_]+)",
         _o(weight=86, hint="npm ", example="npm ERR! code ERESOLVE")),
        ("message", r"^npm (?:ERR!|error) (?!code )\S.*",
         _o(weight=88, hint="npm ", example="npm ERR! ERESOLVE unable to resolve dependency tree")),
    ],
)

YARN = _table(
    "yarn",
    (('yarn ', r"^yarn (?:install|run|test|v\d)"), ('] resolving|] fetching|] linking|] building', r"^\[\d/\d\] (?:Resolving|Fetching|Linking|Building)"), ('yn0', r"^➤ YN\d{4}:"),
     ('yarnpkg', r"^info Visit https://yarnpkg\.com")),
    [
        ("exit", r"^error Command failed(?: with exit code \d+)?", _o(kind="exit", weight=100, hint="command failed",
                                                                  example="error Command failed with exit code 1.")),
        ("visit", r"^info Visit https://yarnpkg\.com", _o(kind="cascade", weight=100, hint="yarnpkg",
                                                        example="info Visit https://yarnpkg.com/en/docs/cli/run for documentation about this command.")),
        ("error", r"^error (?!Command failed)\S.*", _o(weight=84, hint="error ", needs_marker=True,
                                                       example="error Couldn't find package \"left-pad\" on the \"npm\" registry.")),
        ("berry", r"^➤ YN\d{4}: .*(?:[Ee]rror|failed|[Ff]ailure)", _o(weight=84, hint="yn0",
                                                                     example="➤ YN0001: │ Error: left-pad@npm:9.9.9: No candidates found")),
    ],
)

PNPM = _table(
    "pnpm",
    (('pnpm', r"^(?:\$ )?pnpm "), ('progress: resolved', r"^Progress: resolved \d+"), ('packages: +', r"^Packages: \+\d+")),
    [
        ("exit", r"ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL|ELIFECYCLE\s+Command failed|ERR_PNPM_RECURSIVE_EXEC_FIRST_FAIL",
         _o(kind="exit", weight=100, hint="failed", example=" ELIFECYCLE  Command failed with exit code 1.")),
        ("error", r"ERR_PNPM_(?!RECURSIVE_RUN_FIRST_FAIL|RECURSIVE_EXEC_FIRST_FAIL)[A-Z_]+",
         _o(weight=90, hint="err_pnpm_", example=" ERR_PNPM_NO_MATCHING_VERSION  No matching version found for left-pad@9.9.9")),
    ],
)

NODE = _table(
    "node",
    (('internal/', r"^\s+at .+ \((?:node:)?internal/"), ('node:internal', r"^node:internal/"), ('(node:', r"^\(node:\d+\) "), ('node.js v', r"^Node\.js v\d+")),
    [
        ("tsc", r"^\S+\.tsx?(?:\(\d+,\d+\): | ?:\d+:\d+ - )error TS\d+: \S.*", _o(weight=90, hint=".ts(|.tsx(|.ts:|.tsx:",
                                                                                    example="src/parser.ts:12:5 - error TS2322: Type 'string' is not assignable to type 'number'.")),
        ("webpack_error", r"^ERROR in (?:\./|\[|\S+\.\w+\b)\S*", _o(weight=82, hint="error in ", example="ERROR in ./src/app.js 12:4")),
        ("webpack_resolve", r"^Module not found: Error: (?:Can't resolve|Cannot find) ", _o(weight=88, hint="module not found",
                                                                                         example="Module not found: Error: Can't resolve './parser' in '/build/src'")),
        ("gulp_task", r"^Task never defined: \S+", _o(weight=80, hint="task never defined", example="Task never defined: default")),
        # gulp's verdict on a task whose own output said what went wrong.
        ("gulp_errored", r"^'[^']+' errored after ", _o(kind="summary", weight=35, hint="errored after", example="'test' errored after 1.2 s")),
        ("lerna", r"^lerna (?:ERR!|error) (?!\s*$)\S.*", _o(weight=70, hint="lerna ", example="lerna ERR! npm run test exited 1 in 'parser'")),
        ("module_not_found", r"^(?:Error: )?Cannot find module '[^']+'",
         _o(weight=90, hint="cannot find module", example="Error: Cannot find module 'express'")),
        ("uncaught", r"^(?:Uncaught |Unhandled(?:PromiseRejection)?\w*:? ?)?(?:Type|Reference|Syntax|Range|Eval|URI|Aggregate)Error(?: \[\w+\])?: \S",
         _o(weight=88, hint="error", example="TypeError: Cannot read properties of undefined (reading 'map')")),
        ("err_code", r"^(?:\w*Error) \[(ERR_[A-Z_]+)\]: \S",
         _o(weight=86, hint="[err_", example="AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:")),
        ("unhandled", r"UnhandledPromiseRejection(?:Warning)?: ",
         _o(weight=70, hint="unhandledpromiserejection", example="(node:1) UnhandledPromiseRejectionWarning: Error: boom")),
        ("node_version", r"^Node\.js v\d+", _o(kind="cascade", weight=100, hint="node.js v", example="Node.js v20.11.0")),
    ],
)

JEST = _table(
    "jest",
    (('pass |fail ', r"^(?:PASS|FAIL) \S+\.(?:[cm]?[jt]sx?)\b"), ('test suites:', r"^Test Suites: "), ('ran all test suites', r"^Ran all test suites"), ('jest', r"\bjest\b")),
    [
        ("test_header", r"^\s*● (?!Console\b)\S.*", _o(kind="failure", weight=86, hint="●",
                                                      example="  ● Cart › adds an item")),
        ("suite_failed", r"^FAIL \S+", _o(kind="failure", weight=70, hint="fail ", needs_marker=True,
                                          example="FAIL src/cart.test.js")),
        ("summary", r"^Test(?:s| Suites):\s+\d+ failed", _o(kind="summary", weight=35, hint="failed",
                                                            example="Tests:       1 failed, 4 passed, 5 total")),
        ("expect", r"^\s*expect\(.*\)\.\w+\(", _o(weight=60, hint="expect(",
                                                example="    expect(received).toBe(expected) // Object.is equality")),
    ],
)

MOCHA = _table(
    "mocha",
    (('passing (', r"^\s+\d+ passing \(\d+"), ('pending', r"^\s+\d+ pending$"), ('mocha', r"\bmocha\b")),
    [
        ("numbered", r"^\s*\d+\) \S.*", _o(kind="failure", weight=66, hint=_NUMBERED_HINT, needs_marker=True,
                                         example="  1) Parser parses numbers:")),
        ("number_alone", r"^\s*\d+\)$", _o(kind="failure", weight=66, hint="^1)$|^2)$|^3)$|^4)$|^5)$|^6)$|^7)$|^8)$|^9)$| 1)$| 2)$| 3)$| 4)$| 5)$| 6)$| 7)$| 8)$| 9)$| 0)$", needs_marker=True,
                                            example="  1)")),
        ("failing", r"^\s*\d+ failing$", _o(kind="summary", weight=40, hint="failing", example="  2 failing")),
    ],
)

KARMA = _table(
    "karma",
    (("karma", r"\bkarma\b"), ("executed ", r"Executed \d+ of \d+")),
    [
        ("browser", r"^\S.*\(.+\)(?: \S.*)? (?:ERROR|FAILED)$", _o(kind="failure", weight=80, hint="error$|failed$", needs_marker=True,
                                                        example="Chrome 120.0 (Linux x86_64) Parser parses numbers FAILED")),
        ("executed", r"Executed \d+ of \d+ .*\(\d+ FAILED\)", _o(kind="summary", weight=35, hint="executed ",
                                                                 example="Chrome 120.0 (Linux x86_64): Executed 10 of 10 (1 FAILED) (0.2 secs)")),
    ],
)

JASMINE = _table(
    "jasmine",
    (('specs, ', r"^\d+ specs?, \d+ failures?"), ('jasmine', r"\bjasmine\b")),
    [
        ("numbered", r"^\s*\d+\) \S.*", _o(kind="failure", weight=66, hint="^1) |^ 1) |^  1) |^2) |^ 2) |^  2) |^3) |^ 3) |^  3) |^4) |^5) |^6) |^7) |^8) |^9) ",
                                           needs_marker=True, example="1) Parser rejects empty input")),
        ("summary", r"^\d+ specs?, [1-9]\d* failures?", _o(kind="summary", weight=35, hint="specs, |spec, ", example="40 specs, 1 failure")),
    ],
)

CARGO = _table(
    "cargo",
    (('compiling ', r"^\s*Compiling \S+ v\d"), ('finished `|finished dev|finished release|finished test', r"^\s*Finished (?:`?\w+`? profile|dev|release|test)"), ('running unittests|running `target|running target', r"^\s*Running (?:unittests|`?target/)"),
     ('downloaded ', r"^\s*Downloaded \S+ v\d"), ('crates', r"^\s*(?:Updating|Downloading) crates"), ('-->', r"^\s+--> \S+\.rs:\d+"), ('cargo ', r"^(?:\$ )?cargo ")),
    [
        ("cascade", r"^(?:error: )?(?:could not compile|aborting due to|Some errors have detailed explanations|"
                    r"For more information about (?:this|an) error)",
         _o(kind="cascade", weight=100, hint="could not compile|aborting due to|some errors have detailed|for more information about", example="error: could not compile `app` due to 2 previous errors")),
        ("exit", r"^error: (?:build failed|test failed, to rerun|process didn't exit successfully|\d+ targets? failed)",
         _o(kind="exit", weight=100, hint="error: ", example="error: test failed, to rerun pass `--lib`")),
        ("error_code", r"^error\[E\d{4}\]: \S.*", _o(weight=95, hint="error[e",
                                                      example="error[E0308]: mismatched types")),
        ("panic", r"^thread '[^']*' panicked at ", _o(weight=90, hint="panicked at",
                                                     example="thread 'tests::adds' panicked at src/lib.rs:10:5:")),
        ("build_script", r"^error: failed to run custom build command for ", _o(kind="summary", weight=50, hint="custom build command",
                                                                                  example="error: failed to run custom build command for `openssl-sys v0.9.0`")),
        ("error", r"^error: (?!aborting|could not compile|build failed|test failed)\S.*",
         _o(weight=85, hint="error: ", needs_marker=True, example="error: failed to select a version for `serde`.")),
        ("rustfmt", r"^Diff in \S+\.rs at line \d+:$", _o(weight=80, hint="diff in ", example="Diff in /build/src/parser.rs at line 12:")),
        ("test_stdout", r"^---- \S+ stdout ----$", _o(kind="failure", weight=82, hint="stdout ----",
                                                     example="---- tests::adds stdout ----")),
        ("test_failed", r"^test \S+ \.\.\. FAILED$", _o(kind="failure", weight=76, hint="... failed",
                                                        example="test tests::adds ... FAILED")),
        ("test_result", r"^test result: FAILED", _o(kind="summary", weight=35, hint="test result: failed",
                                                    example="test result: FAILED. 3 passed; 1 failed; 0 ignored")),
    ],
)

GO = _table(
    "go",
    (('^=== run|^=== pause|^=== cont', r"^=== (?:RUN|PAUSE|CONT)\s"), ('--- pass|--- fail|--- skip', r"^--- (?:PASS|FAIL|SKIP): "), ('^ok \t|^ok\t|^ok  ', r"^ok\s+\S+\s+[\d.]+s"), ('go: ', r"^go: (?:downloading|finding) "),
     ('$ go |go build|go test|go vet|go mod|go run|go install|go get', r"^(?:\$ )?go (?:build|test|vet|mod|run|install|get) "), ('no test files', r"^\?\s+\S+\s+\[no test files\]")),
    [
        ("subtest_fail", r"^\s*--- FAIL: \S+/\S+", _o(kind="failure", weight=88, hint="--- fail:",
                                                        example="    --- FAIL: TestParse/empty_input (0.00s)")),
        ("test_fail", r"^\s*--- FAIL: \S+", _o(kind="failure", weight=86, hint="--- fail:",
                                               example="--- FAIL: TestParse (0.00s)")),
        ("panic", r"^panic: \S", _o(weight=90, hint="panic: ", example="panic: runtime error: index out of range [3] with length 3")),
        ("fatal", r"^fatal error: \S", _o(weight=86, hint="fatal error: ", needs_marker=True,
                                          example="fatal error: all goroutines are asleep - deadlock!")),
        ("compile", r"^(?:\./)?[\w./-]+\.go:\d+(?::\d+)?: (?!warning)\S.*",
         _o(weight=85, hint=".go:", example="./main.go:12:5: undefined: parseConfig")),
        ("test_log", r"^\s+[\w./-]+_test\.go:\d+: \S.*", _o(weight=70, hint="_test.go:",
                                                              example="    parse_test.go:21: got 3, want 4")),
        ("module", r"^go: .*(?:missing go\.sum entry|cannot find module|unknown revision|invalid version|"
                   r"no matching versions|module .* not found|requires go)",
         _o(weight=90, hint="go: ", example="go: example.com/lib@v1.2.3: missing go.sum entry")),
        ("pkg_fail", r"^FAIL\s+\S+\s+(?:[\d.]+s|\[build failed\]|\[setup failed\])",
         _o(kind="summary", weight=40, hint="fail", example="FAIL\texample.com/app/parse\t0.012s")),
        ("fail_alone", r"^FAIL$", _o(kind="summary", weight=10, hint="fail", needs_marker=True, example="FAIL")),
    ],
)

PYTEST = _table(
    "pytest",
    (('test session starts', r"^=+ test session starts =+$"), ('collected ', r"^collected \d+ items?"), ('platform ', r"^platform \w+ -- Python "), ('pytest', r"^(?:\$ )?(?:python -m )?pytest\b"),
     ('py::', r"::\w+ (?:PASSED|FAILED|ERROR)"), ('short test summary', r"^=+ short test summary info =+$")),
    [
        ("e_line", r"^E\s{2,}\S.*", _o(weight=84, hint="^e  ", needs_marker=True,
                                      example="E       AssertionError: assert 3 == 4")),
        ("test_header", r"^_{3,} (?!Captured)(.+?) _{3,}$", _o(kind="failure", weight=72, hint="___",
                                                              example="________________________ test_parse ________________________")),
        ("short_summary", r"^(?:FAILED|ERROR) \S+::\S+", _o(kind="summary", weight=62, hint="py::",
                                                            example="FAILED tests/test_parse.py::test_parse - assert 3 == 4")),
        ("collect_error", r"^(?:ERROR|FAILED) (?:collecting )?\S+\.py(?: - .*)?$",
         _o(kind="summary", weight=60, hint="error |failed ", example="ERROR tests/test_parse.py - ImportError: cannot import name 'x'")),
        ("location", r"^\S+\.py:\d+: (?:in \S+|\w*(?:Error|Exception|Failed)\w*)$",
         _o(weight=50, hint=".py:", example="tests/test_parse.py:21: AssertionError")),
        ("totals", r"^=+ .*\b\d+ (?:failed|errors?)\b.* =+$", _o(kind="summary", weight=35, hint="failed|error",
                                                                example="==================== 1 failed, 3 passed in 0.12s ====================")),
        ("usage_error", r"^ERROR: (?:file or directory not found|usage:|not found:)",
         _o(weight=80, hint="error: ", example="ERROR: file or directory not found: tests/test_missing.py")),
    ],
)

PYTHON = _table(
    "python",
    (('traceback', r"^Traceback \(most recent call last\):"), ('file "', r"^\s+File \".+\.py\", line \d+"), ('$ python|python -m|python setup', r"^(?:\$ )?python[\d.]* ")),
    [
        ("chained", r"^(?:During handling of the above exception|The above exception was the direct cause)",
         _o(kind="cascade", weight=100, hint="above exception", example="During handling of the above exception, another exception occurred:")),
        ("exception", r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)(?::\s?\S.*)?$",
         _o(weight=86, needs_marker=True, hint="error:|exception:|exit:|interrupt|warning:|error$|exception$|exit$", example="ModuleNotFoundError: No module named 'yaml'")),
        ("unittest", r"^(?:ERROR|FAIL): \w+ \([\w.]+\)", _o(kind="failure", weight=84, hint="error: |fail: ",
                                                             example="FAIL: test_parse (tests.test_parser.ParserTest)")),
        ("traceback", r"^Traceback \(most recent call last\):$", _o(kind="failure", weight=55, hint="traceback",
                                                                    example="Traceback (most recent call last):")),
    ],
)

PIP = _table(
    "pip",
    (('collecting ', r"^Collecting \S+"), ('requirement already satisfied', r"^Requirement already satisfied: "), ('successfully installed', r"^Successfully installed "), ('pip install|pip3 install', r"^(?:\$ )?pip\d? install "),
     ('downloading ', r"^\s*Downloading \S+\.(?:whl|tar\.gz)"), ('installing collected packages', r"^Installing collected packages: ")),
    [
        ("resolve", r"^(?:ERROR: )?(?:Could not find a version that satisfies|No matching distribution found|"
                    r"Cannot install .* because|ResolutionImpossible|Could not install packages due to|"
                    r"Failed building wheel for|Could not build wheels for|Package .* requires a different Python)",
         _o(weight=92, hint="could not find a version|no matching distribution|cannot install|resolutionimpossible|could not install packages|failed building wheel|could not build wheels|requires a different python", example="ERROR: No matching distribution found for left-pad==9.9")),
        ("subprocess", r"^(?:error: subprocess-exited-with-error|× .+ did not run successfully)",
         _o(weight=58, hint="subprocess-exited-with-error|did not run successfully", example="error: subprocess-exited-with-error")),
        ("cascade", r"^(?:note: This error originates from a subprocess|ERROR: Command errored out with exit status|"
                    r"╰─> )", _o(kind="cascade", weight=100, hint="this error originates|command errored out|╰─>", example="note: This error originates from a subprocess, and is likely not a problem with pip.")),
    ],
)

JAVA = _table(
    "java",
    (('.java:', r"^\s+at [\w$.]+\([\w$]+\.java:\d+\)$"), ('exception in thread', r"^Exception in thread "), ('caused by: ', r"^Caused by: [\w$.]+")),
    [
        ("javac", r"^(?:\s*\[javac\] )?\S+\.java:\d+: error: \S.*", _o(weight=94, hint=".java:", example="src/Main.java:12: error: cannot find symbol")),
        ("main_thread", r"^Exception in thread \"[^\"]*\" \S+", _o(weight=88, hint="exception in thread",
                                                                 example="Exception in thread \"main\" java.lang.IllegalStateException: no config")),
        ("exception", r"^(?:[a-z_][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Failure|Failed)\b(?::.*)?$",
         _o(weight=80, hint="exception$|error$|failure$|failed$|exception:|error:|failure:|failed:", example="java.lang.AssertionError: expected:<3> but was:<4>")),
        ("caused_by", r"^Caused by: \S+", _o(weight=66, hint="caused by:", example="Caused by: java.io.FileNotFoundException: app.conf")),
        ("junit_summary", r"^Tests run: \d+, Failures: [1-9]", _o(kind="summary", weight=35, hint="tests run:",
                                                                  example="Tests run: 4, Failures: 1")),
    ],
)

MAVEN = _table(
    "maven",
    (('[info] building |[info] scanning for projects|[info] build |[info] ---|[info] -----', r"^\[INFO\] (?:Scanning for projects|Building |BUILD (?:SUCCESS|FAILURE)|-+< |--- )"), ('reactor summary', r"^\[INFO\] Reactor Summary"),
     ('mvn ', r"^(?:\$ )?mvn "), ('maven-surefire-plugin', r"maven-surefire-plugin"), ('^[error] |^[warning] ', r"^\[(?:INFO|WARNING|ERROR)\] ")),
    [
        ("cascade", r"^\[ERROR\] (?:-> \[Help 1\]|To see the full stack trace|Re-run Maven using|For more information about the errors|"
                    r"After correcting the problems|\[Help 1\]|\s*$|mvn <args> -rf |Please refer to .* for the individual test results|"
                    r"Please refer to dump files)|^\[ERROR\]$",
         _o(kind="cascade", weight=100, hint="[error]", example="[ERROR] -> [Help 1]")),
        ("compile", r"^\[ERROR\] \S+\.(?:java|kt|scala|groovy):\[?\d+[,:]?\d*\]? \S.*",
         _o(weight=94, hint="[error]", example="[ERROR] /src/main/java/app/Main.java:[12,8] cannot find symbol")),
        ("dependency", r"^\[ERROR\] Failed to execute goal .*(?:Could not resolve dependencies|Could not find artifact|"
                       r"Failed to collect dependencies|Could not transfer artifact|Non-resolvable)",
         _o(weight=88, hint="failed to execute goal", example="[ERROR] Failed to execute goal on project app: Could not resolve dependencies for project x:app:jar:1.0")),
        ("class_summary", r"^Tests run: \d+, .*<<< (?:FAILURE|ERROR)!$", _o(kind="summary", weight=40, hint="tests run:",
                                                                             example="Tests run: 15, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.05 sec <<< FAILURE!")),
        ("test_failure", r"<<< (?:FAILURE|ERROR)!$", _o(kind="failure", weight=86, hint="<<< ",
                                                       example="parses(app.ParserTest)  Time elapsed: 0.01 sec  <<< FAILURE!")),
        ("test_summary_line", r"^\[ERROR\]\s+(?:Run \d+: )?[\w$.]+[.:#]\w+(?::\d+)? (?:»|\S).*",
         _o(kind="failure", weight=66, hint="[error] ", example="[ERROR]   ParserTest.parses:21 expected:<3> but was:<4>")),
        ("goal", r"^\[ERROR\] Failed to execute goal \S+", _o(kind="summary", weight=50, hint="failed to execute goal",
                                                              example="[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5:test (default-test) on project app: There are test failures.")),
        ("tests_run", r"^\[ERROR\] Tests run: \d+, Failures: \d+, Errors: \d+", _o(kind="summary", weight=35, hint="tests run:",
                                                                              example="[ERROR] Tests run: 4, Failures: 1, Errors: 0, Skipped: 0")),
        ("error", r"^\[ERROR\] \S.*", _o(weight=62, hint="[error] ", example="[ERROR] The project app:1.0 has 1 error")),
        ("build_failure", r"^\[INFO\] BUILD FAILURE$", _o(kind="summary", weight=20, hint="build failure",
                                                         example="[INFO] BUILD FAILURE")),
    ],
)

GRADLE = _table(
    "gradle",
    (('> task :', r"^> Task :"), ('build successful|build failed', r"^BUILD (?:SUCCESSFUL|FAILED) in "), ('gradle', r"^(?:\$ )?\.?/?gradlew? "), ('gradle daemon', r"^Starting a Gradle Daemon"),
     ('daemon will be stopped', r"^Daemon will be stopped"), ('actionable task', r"^\d+ actionable tasks?: ")),
    [
        ("cascade", r"^(?:\* Try:|> Run with --(?:stacktrace|info|debug|scan)|Run with --(?:stacktrace|info|scan)|"
                    r"Get more help at https://help\.gradle\.org|BUILD FAILED in |\d+ actionable tasks?:|> Get more help at)",
         _o(kind="cascade", weight=100, hint="* try:|run with --|get more help at|build failed in|actionable task", example="* Try:")),
        ("kotlin", r"^e: (?:file://)?\S+\.kts?:? ?(?:\(\d+, \d+\)|:\d+:\d+)?:? \S.*",
         _o(weight=94, hint="e: file|e: /|e: c:", example="e: file:///src/main/kotlin/App.kt:12:5 Unresolved reference: parse")),
        ("test_failed", r"^\S.* > .+ FAILED$", _o(needs_marker=True, kind="failure", weight=86, hint="failed",
                                                 example="app.ParserTest > parses FAILED")),
        ("checkstyle", r"^\[ant:checkstyle\] \[ERROR\] \S+:\d+(?::\d+)?: \S.*", _o(weight=86, hint="[ant:checkstyle]",
                                                                                 example="[ant:checkstyle] [ERROR] /src/main/java/app/Parser.java:12:5: Missing a Javadoc comment. [JavadocMethod]")),
        ("task_failed", r"^> Task \S+ FAILED$", _o(kind="failure", weight=50, hint="failed", example="> Task :app:test FAILED")),
        ("what_went_wrong", r"^(?:> )?(?:Could not resolve|Could not find|Could not determine|Could not get|"
                            r"A problem occurred|Plugin .* not found|Failed to apply plugin)",
         _o(needs_marker=True, weight=74, hint="could not resolve|could not find|could not determine|could not get|a problem occurred|not found|failed to apply plugin", example="> Could not resolve com.example:lib:1.0.")),
        ("what_went_wrong_header", r"^\* What went wrong:$", _o(kind="summary", weight=72, hint="what went wrong", points_next=True,
                                                                 example="* What went wrong:")),
        ("execution_failed", r"^Execution failed for task '[^']+'", _o(kind="summary", weight=46, hint="execution failed for task",
                                                                    example="Execution failed for task ':app:compileJava'.")),
        ("build_failed", r"^FAILURE: Build failed with an exception", _o(kind="summary", weight=35, hint="build failed",
                                                                        example="FAILURE: Build failed with an exception.")),
        ("tests_failed", r"^\d+ tests completed, \d+ failed", _o(kind="summary", weight=35, hint="failed",
                                                                 example="12 tests completed, 1 failed")),
    ],
)

MAKE = _table(
    "make",
    (('make[|make: ', r"^g?make(?:\[\d+\])?: (?:Entering|Leaving|Nothing to be done)"), ('$ make|$ gmake', r"^(?:\$ )?g?make\b"), ('%] building|%] linking|%] built', r"^\[\s*\d+%\] (?:Building|Linking|Built)"),
     ('-- the c|-- configuring done|-- build files have been written', r"^-- (?:The C|Configuring done|Build files have been written)"), ('cmake ', r"^(?:\$ )?cmake ")),
    [
        ("directory", r"^g?make(?:\[\d+\])?: (?:Entering|Leaving) directory", _o(kind="cascade", weight=100, hint="make[|make: ",
                                                                                  example="make[2]: Leaving directory '/src/app'")),
        ("no_rule", r"^g?make(?:\[\d+\])?: \*\*\* No (?:rule to make target|targets specified)",
         _o(weight=88, hint="*** no", example="make: *** No rule to make target 'app.o', needed by 'app'.  Stop.")),
        ("recipe", r"^(?:g?make|mozmake(?:\.exe)?|ninja)(?:\[\d+\])?: \*\*\* ", _o(kind="exit", weight=100, hint="make: ***|]: ***|ninja: ***",
                                                                                 example="make: *** [Makefile:12: all] Error 2")),
        ("ninja", r"^ninja: build stopped: ", _o(kind="exit", weight=100, hint="ninja", example="ninja: build stopped: subcommand failed.")),
        ("cmake", r"^CMake Error(?: at .+)?:", _o(weight=88, hint="cmake error", example="CMake Error at CMakeLists.txt:10 (find_package):")),
        ("cmake_incomplete", r"^-- Configuring incomplete, errors occurred!", _o(kind="cascade", weight=100, hint="configuring incomplete",
                                                                                 example="-- Configuring incomplete, errors occurred!")),
        ("ctest_failed", r"^\s*\d+ - \S+ \((?:Failed|SEGFAULT|Timeout|Subprocess aborted|Child aborted|Exception|OTHER_FAULT|Not Run)\)$",
         _o(kind="failure", weight=80, hint="failed)|segfault)|timeout)|aborted)|exception)|fault)|not run)",
            example="\t 12 - parser_test (Failed)")),
        ("ctest_summary", r"^\d+% tests passed, [1-9]\d* tests? failed out of \d+", _o(kind="summary", weight=35, hint="tests passed",
                                                                                     example="92% tests passed, 1 tests failed out of 12")),
        ("configure", r"^configure: error: \S.*", _o(weight=90, hint="configure: error", example="configure: error: C compiler cannot create executables")),
    ],
)

GCC = _table(
    "gcc",
    (('^gcc |^cc |^g++ |^c++ |^clang|/gcc |/cc |/g++ |/c++ |/clang', r"^(?:\S*/)?(?:gcc|g\+\+|cc|c\+\+|clang\+?\+?)(?:-\d+)? "), ('in file included from', r"^In file included from "), ('.c:|.cc:|.cpp:|.h:|.hpp:', r"^\S+\.(?:c|cc|cpp|h|hpp):\d+:\d+: (?:warning|note): ")),
    [
        ("cascade", r"^(?:collect2: error: ld returned \d+ exit status|clang(?:\+\+)?: error: linker command failed|"
                    r"compilation terminated\.|\d+ errors? generated\.)",
         _o(kind="exit", weight=100, hint="collect2: error|linker command failed|compilation terminated|generated.", example="collect2: error: ld returned 1 exit status")),
        ("compile", r"^\S+?:\d+(?::\d+)?: (?:fatal )?error: \S.*", _o(weight=93, hint="error: ",
                                                                       example="src/app.c:12:5: error: 'count' undeclared (first use in this function)")),
        ("undefined_ref", r"undefined reference to [`'\"]", _o(weight=90, hint="undefined reference",
                                                               example="app.o: in function `main': undefined reference to `parse'")),
        ("undefined_symbols", r"^Undefined symbols for architecture \S+:", _o(weight=88, hint="undefined symbols",
                                                                             example="Undefined symbols for architecture x86_64:")),
        ("linker", r"^(?:\S*/)?(?:ld(?:\.\w+)?|lld-link|ld64\.lld|lld): (?!warning)(?:error: )?\S.*",
         _o(weight=80, hint="ld: |lld-link|ld64|gold: |ld.bfd", example="/usr/bin/ld: cannot find -lssl")),
        ("tool_error", r"^(?:\S*/)?(?:gcc|g\+\+|cc|c\+\+|clang\+?\+?|cc1\w*|as)(?:-\d+)?: (?:fatal )?error: \S.*",
         _o(weight=82, hint="error: ", example="gcc: fatal error: no input files")),
        ("sanitizer", r"==\d+==ERROR: \w+Sanitizer: \S.*|^SUMMARY: \w+Sanitizer: ",
         _o(weight=90, hint="sanitizer", example="==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010")),
    ],
)

DOCKER = _table(
    "docker",
    (('#1|#2|#3|#4|#5|#6|#7|#8|#9', r"^#\d+ \["), ('#1|#2|#3|#4|#5|#6|#7|#8|#9', r"^#\d+ (?:DONE|CACHED|ERROR)"), ('step ', r"^Step \d+/\d+ : "), ('sending build context', r"^Sending build context to Docker daemon"),
     ('docker ', r"^(?:\$ )?docker (?:build|buildx|push|pull|run|compose)\b"), ('successfully built|successfully tagged', r"^Successfully (?:built|tagged) ")),
    [
        ("process_exit", r"^(?:#\d+ )?(?:ERROR: )?(?:failed to solve: )?(?:process|executor failed running) .*(?:did not complete successfully|exit code: ?\d+)",
         _o(kind="exit", weight=100, hint="did not complete successfully|exit code", example="ERROR: failed to solve: process \"/bin/sh -c make\" did not complete successfully: exit code: 2")),
        ("legacy_exit", r"^The command '.+' returned a non-zero code: \d+", _o(kind="exit", weight=100, hint="non-zero code",
                                                                              example="The command '/bin/sh -c make' returned a non-zero code: 2")),
        ("solve", r"^(?:#\d+ )?(?:ERROR: )?failed to (?:solve|compute cache key|read dockerfile|load build definition)\S*:? \S.*",
         _o(weight=88, hint="failed to ", example="ERROR: failed to solve: node:99-alpine: not found")),
        ("daemon", r"^(?:docker: )?Error response from daemon: \S.*", _o(weight=88, hint="error response from daemon",
                                                                         example="Error response from daemon: manifest for app:latest not found")),
        ("registry", r"(?:pull access denied|manifest unknown|no basic auth credentials|denied: requested access|"
                     r"unauthorized: authentication required|toomanyrequests:)",
         _o(weight=86, hint="pull access denied|manifest unknown|no basic auth|denied: requested|unauthorized: authentication|toomanyrequests",
           example="denied: requested access to the resource is denied")),
        ("copy", r"^(?:#\d+ )?(?:COPY|ADD) failed: ", _o(weight=88, hint="failed: ", example="COPY failed: file not found in build context")),
        ("pulling", r"^Unable to find image '[^']+' locally$", _o(kind="cascade", weight=100, hint="unable to find image",
                                                                example="Unable to find image 'alpine:3.19' locally")),
        ("daemon_down", r"Cannot connect to the Docker daemon", _o(weight=86, hint="docker daemon",
                                                                   example="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")),
    ],
)

KUBECTL = _table(
    "kubectl",
    (('kubectl ', r"^(?:\$ )?kubectl "), ('created$|configured$|unchanged$|deleted$', r"^(?:deployment|service|pod|configmap|secret|ingress|job)[\w.]*/\S+ (?:created|configured|unchanged|deleted)"),
     ('waiting for deployment', r"^Waiting for deployment \""), ('successfully rolled out', r"^deployment \"\S+\" successfully rolled out")),
    [
        ("server", r"^Error from server(?: \(\w+\))?: \S.*", _o(weight=92, hint="error from server",
                                                                example="Error from server (NotFound): deployments.apps \"web\" not found")),
        ("connect", r"^(?:The connection to the server \S+ was refused|Unable to connect to the server: )",
         _o(weight=88, hint="connection to the server|unable to connect to the server", example="The connection to the server localhost:8080 was refused - did you specify the right host or port?")),
        ("rollout", r"^(?:error: )?(?:deployment \"\S+\" exceeded its progress deadline|timed out waiting for the condition)",
         _o(weight=84, hint="exceeded its progress deadline|timed out waiting for the condition", example="error: deployment \"web\" exceeded its progress deadline")),
        ("validation", r"^error: (?:error validating|unable to recognize|error parsing|no objects passed|the server doesn't have a resource type)",
         _o(weight=90, hint="error: ", example="error: unable to recognize \"app.yaml\": no matches for kind \"Deployment\" in version \"apps/v1beta1\"")),
        ("error", r"^error: \S.*", _o(weight=76, hint="error: ", needs_marker=True, example="error: the path \"app.yaml\" does not exist")),
    ],
)

KUBERNETES = _table(
    "kubernetes",
    (('events:', r"^Events:"), ('reason   age|reason  age', r"^\s+Type\s+Reason\s+Age\s+From\s+Message"), ('namespace:', r"^Namespace:\s+\S+"), ('  warning  |  normal  ', r"^\s+(?:Warning|Normal)\s+\w+\s+\S+\s+\S+"),
     ('ready', r"^NAME\s+READY\s+STATUS\s+RESTARTS")),
    [
        ("root_event", r"\b(?:OOMKilled|FailedScheduling|FailedMount|FailedAttachVolume|ErrImagePull|InvalidImageName|"
                       r"CreateContainerConfigError|CreateContainerError|FailedCreatePodSandBox|ContainerCannotRun|"
                       r"RunContainerError|Evicted|DeadlineExceeded|BackoffLimitExceeded|FailedCreate|ProgressDeadlineExceeded)\b",
         _o(weight=88, hint="oomkilled|failedscheduling|failedmount|failedattach|errimagepull|invalidimagename|createcontainer|failedcreate|containercannotrun|runcontainererror|evicted|deadlineexceeded",
           example="  Warning  FailedScheduling  2m  default-scheduler  0/3 nodes are available: 3 Insufficient cpu.")),
        ("backoff", r"\b(?:CrashLoopBackOff|ImagePullBackOff|BackOff)\b", _o(weight=72, hint="backoff",
                                                                             example="  Warning  BackOff  1m  kubelet  Back-off restarting failed container web in pod web-7d4b9c8f6d-x2x7k")),
        ("unhealthy", r"\bUnhealthy\b.*(?:probe failed|failed)", _o(weight=78, hint="unhealthy",
                                                                    example="  Warning  Unhealthy  30s  kubelet  Readiness probe failed: HTTP probe failed with statuscode: 503")),
        ("terminated", r"^\s*Reason:\s+(?:Error|OOMKilled|ContainerCannotRun|DeadlineExceeded)$",
         _o(weight=70, hint="reason:", example="      Reason:       OOMKilled")),
        ("klog_error", r"^[EF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] \S.*", _o(weight=60, hint="^e0|^e1|^f0|^f1", field="text",
                                                       example="E1129 20:18:37.123456   12345 reflector.go:138] failed to list *v1.Pod: forbidden")),
    ],
)

TERRAFORM = _table(
    "terraform",
    (('terraform', r"^Terraform (?:v\d|has been successfully|will perform|used the selected)"), ('terraform ', r"^(?:\$ )?terraform (?:init|plan|apply|validate|fmt)"),
     ('initializing ', r"^Initializing (?:the backend|provider plugins|modules)"), ('plan: ', r"^Plan: \d+ to add"), ('╷', r"^╷$"), ('.tf line', r"\.tf line \d+")),
    [
        ("error", r"^(?:│ )?Error: \S.*", _o(weight=90, hint="error: ", needs_marker=True,
                                            example="│ Error: Reference to undeclared resource")),
    ],
)

HELM = _table(
    "helm",
    (('helm ', r"^(?:\$ )?helm (?:upgrade|install|template|lint|dependency|package|repo|rollback)"), ('release "', r"^Release \"\S+\" (?:has been|does not exist)"),
     ('last deployed', r"^LAST DEPLOYED: "), ('hang tight', r"Hang tight while we grab the latest from your chart repositories"), ('==> linting', r"^==> Linting ")),
    [
        ("install", r"^Error: (?:INSTALLATION|UPGRADE|ROLLBACK) FAILED: \S.*", _o(weight=93, hint="failed: ",
                                                                                 example="Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress")),
        ("lint", r"^\[ERROR\] (?:templates/|Chart\.yaml|values\.yaml)\S*: \S.*", _o(weight=88, hint="[error]",
                                                                                    example="[ERROR] templates/deployment.yaml: unable to parse YAML")),
        ("error", r"^Error: \S.*", _o(weight=86, hint="error: ", needs_marker=True,
                                      example="Error: template: app/templates/svc.yaml:7:20: executing \"app/templates/svc.yaml\" at <.Values.port>: nil pointer")),
    ],
)

RUBY = _table(
    "ruby",
    (('^ruby |$ ruby|^bundle |$ bundle|^rake|$ rake|^rspec|$ rspec', r"^(?:\$ )?(?:bundle (?:install|exec)|rake|rspec|ruby) "), ('finished in ', r"^Finished in [\d.]+ seconds"), ('examples, |example, ', r"^\d+ examples?, \d+ failures?"),
     ('runs, ', r"^\d+ runs, \d+ assertions")),
    [
        ("numbered", r"^\s*\d+\) \S.*", _o(kind="failure", weight=66, hint=_NUMBERED_HINT, needs_marker=True,
                                         example="  1) Parser parses numbers")),
        ("rake_aborted", r"^rake aborted!$", _o(kind="failure", weight=60, hint="rake aborted", points_next=True, example="rake aborted!")),
        # rake's verdict on a shell command (``sh``) whose own output said what went wrong.
        ("rake_command", r"^Command failed with status \(\d+\): ", _o(kind="exit", weight=60, hint="command failed with status",
                                                                      example="Command failed with status (1): [bundle exec rspec...]")),
        ("rake_trace", r"^\(See full trace by running task with --trace\)", _o(kind="cascade", weight=100, hint="see full trace",
                                                                                 example="(See full trace by running task with --trace)")),
        ("rspec_rerun", r"^rspec \./\S+:\d+ # \S.*", _o(kind="summary", weight=58, hint="rspec ./",
                                                        example="rspec ./spec/parser_spec.rb:12 # Parser parses numbers")),
        ("rails_rerun", r"^(?:bin/)?rails test \S+:\d+$", _o(kind="summary", weight=58, hint="rails test ",
                                                             example="rails test test/models/user_test.rb:12")),
        ("cucumber_rerun", r"^cucumber(?: -p \S+)? \S+\.feature:\d+ # \S.*", _o(kind="summary", weight=58, hint="cucumber ",
                                                                             example="cucumber features/login.feature:12 # Scenario: Logging in")),
        ("cucumber_summary", r"^\d+ scenarios? \((?:\d+ \w+, )*[1-9]\d* failed", _o(kind="summary", weight=35, hint="scenario",
                                                                                 example="3 scenarios (1 failed, 2 passed)")),
        ("examples", r"^\d+ examples?, [1-9]\d* failures?", _o(kind="summary", weight=35, hint="failure",
                                                               example="12 examples, 1 failure")),
        ("minitest_header", r"^\s*(?:Failure|Error):$", _o(needs_marker=True, kind="failure", weight=78, hint="failure:|error:",
                                                          example="Failure:")),
        ("minitest_summary", r"^\d+ runs, \d+ assertions, (?:[1-9]\d* failures|\d+ failures, [1-9]\d* errors)",
         _o(kind="summary", weight=35, hint="runs,", example="10 runs, 20 assertions, 1 failures, 0 errors, 0 skips")),
        ("bundler", r"^(?:Bundler could not find compatible versions|Could not find gem|An error occurred while installing|"
                    r"Gem::\w+Error|Bundler::\w+Error)",
         _o(weight=90, hint="bundler|could not find gem|error occurred while installing|gem::", example="An error occurred while installing nokogiri (1.16.0), and Bundler cannot continue.")),
        ("exception", r"^\S+\.rb:\d+:in `[^']+': .+ \([A-Z]\w*(?:::\w+)*\)$", _o(weight=86, hint=".rb:",
                                                                                example="lib/app/parser.rb:12:in `parse': undefined method `strip' for nil:NilClass (NoMethodError)")),
        ("rspec_load", r"^An error occurred (?:while loading \S+|in an? `?(?:before|after|around)\(:(?:suite|context|all)\)`? hook)",
         _o(weight=86, hint="an error occurred", example="An error occurred while loading ./spec/parser_spec.rb.")),
        ("rubocop", r"^\S+\.(?:rb|rake|gemspec):\d+:\d+: [CEFRW]: \S.*", _o(weight=82, hint=".rb:", example="lib/app.rb:3:1: E: Lint/Syntax: unexpected token")),
    ],
)

PHP = _table(
    "php",
    (('phpunit ', r"^PHPUnit \d"), ('composer|phpunit', r"^(?:\$ )?(?:composer|phpunit|vendor/bin/phpunit) "), ('loading composer repositories', r"^Loading composer repositories")),
    [
        ("fatal", r"^(?:PHP )?(?:Fatal|Parse) error:\s+\S.*", _o(weight=92, hint="error:", example="PHP Fatal error:  Uncaught Error: Class \"App\\Kernel\" not found")),
        ("numbered", r"^\d+\) [\w\\]+::\w+", _o(kind="failure", weight=84, hint="^1) |^2) |^3) |^4) |^5) |^6) |^7) |^8) |^9) ",
                                                example="1) App\\Tests\\ParserTest::testParse")),
        ("there_were", r"^There (?:was|were) \d+ (?:failures?|errors?):$", _o(kind="summary", weight=40, hint="there w",
                                                                             example="There was 1 failure:")),
        ("summary", r"^(?:FAILURES!|ERRORS!)$|^Tests: \d+, Assertions: \d+, (?:Failures|Errors): \d+",
         _o(kind="summary", weight=35, hint="failures!|errors!|assertions:", example="Tests: 5, Assertions: 9, Failures: 1.")),
        # run-tests.php prints a test's verdict after its ========DIFF======== block: it closes the
        # test's report (a summary of it), it does not open one.
        ("run_tests_fail", r"^FAIL \S.* \[[^\]]+\.phpt\]", _o(kind="summary", weight=84, hint=".phpt]",
                                                                example="FAIL Parser handles empty input [tests/parser/empty.phpt]")),
        ("run_tests_ok", r"^(?:XFAIL|SKIP|PASS) \S.* \[[^\]]+\.phpt\]", _o(kind="pass", weight=100, hint=".phpt]",
                                                                         example="XFAIL Parser keeps comments [tests/parser/comments.phpt]   XFAIL REASON: cannot keep them yet")),
        # Composer's verdict heads its numbered problems; each problem's first "- ..." line names the
        # package and constraint that could not be met, so that line is the one shown.
        ("composer", r"^(?:Your requirements could not be resolved|Installation failed, reverting)",
         _o(kind="summary", weight=80, hint="your requirements could not be resolved|installation failed", example="Your requirements could not be resolved to an installable set of packages.")),
        ("composer_problem", r"^\s+Problem \d+$", _o(weight=86, hint="problem ", points_next=True, example="  Problem 1")),
        # PHPStan's table of findings: the "Line   src/X.php" header row opens the file's findings,
        # which its "[ERROR] Found N errors" verdict below only counts. The signature reads the first
        # finding too, so two findings in one file differ.
        ("phpstan_file", r"^\s*Line\s{2,}\S+\.php\s*$", _o(kind="failure", weight=80, hint="^ line  |^  line  ",
                                                             with_next=True, example="  Line   src/Parser/Lexer.php")),
    ],
)

DOTNET = _table(
    "dotnet",
    (('dotnet ', r"^(?:\$ )?dotnet (?:build|test|restore|publish)"), ('microsoft (r)', r"Microsoft \(R\) (?:Build Engine|Test Execution)"), ('determining projects to restore', r"^\s*Determining projects to restore"),
     ('test run for', r"^Test run for \S+\.dll")),
    [
        ("compile", r"\b(?:error|Error) (?:CS|MSB|NU|FS|BC|NETSDK)\d{4}: \S.*", _o(weight=93, hint="error ",
                                                                                  example="Program.cs(12,5): error CS0103: The name 'x' does not exist in the current context")),
        ("nunit", r"^\s*\d+\) (?:Test (?:Failure|Error) : |Failed : |Error : )\S+", _o(kind="failure", weight=84, hint=") test failure|) test error|) failed :|) error :",
                                                                                  example="1) Failed : App.Tests.ParserTests.RejectsEmptyInput")),
        ("xunit_fail", r"\[FAIL\]$", _o(needs_marker=True, kind="failure", weight=84, hint="[fail]", example="    App.Tests.ParserTests.Parses [FAIL]")),
        ("test_failed", r"^\s*Failed [\w.]+(?:\(.*\))?(?: \[[^\]]+\])?$", _o(needs_marker=True, kind="failure", weight=84, hint="failed ",
                                                                            example="  Failed App.Tests.ParserTests.Parses [12 ms]")),
        ("summary", r"^(?:Build FAILED\.|Test Run Failed\.|Failed!\s+- Failed:\s+[1-9])", _o(kind="summary", weight=35, hint="failed",
                                                                                            example="Failed!  - Failed:     1, Passed:    10, Skipped:     0")),
    ],
)

SBT = _table(
    "sbt",
    (('[info] loading|[info] resolving|[info] compiling|[info] set current project|[info] welcome to sbt|[info] done compiling', r"^\[info\] (?:Loading|Resolving|Compiling|Set current project|welcome to sbt|Done compiling)"), ('sbt ', r"^(?:\$ )?sbt "),
     ('[info] tests|[info] all tests|[info] run completed', r"^\[info\] (?:Tests|All tests|Run completed)")),
    [
        ("cascade", r"^\[error\] (?:Total time:|\(.*\) sbt\.\w+Exception: (?:Tests unsuccessful|Compilation failed)|"
                    r"Failed tests:|Error during tests:|(?:Failed|Error|Passed): Total \d+, |one error found|\d+ errors found|\s*$|Use 'last' for the full log)",
         _o(kind="exit", weight=100, hint="[error]", example="[error] Total time: 12 s, completed 1 Jan 2026 10:00:00")),
        ("scalatest", r"\*\*\* FAILED \*\*\*", _o(kind="failure", weight=86, hint="*** failed ***",
                                                  example="[info] - parses numbers *** FAILED ***")),
        ("compile", r"^\[error\] \S+\.(?:scala|java):\d+(?::\d+)?: \S.*", _o(weight=92, hint="[error]",
                                                                             example="[error] /src/main/scala/App.scala:12:5: not found: value parse")),
        ("mima", r"^\[error\]\s+\* \S.* in (?:current|other|new|old) version\b",
         _o(weight=82, hint="in current version|in other version|in new version|in old version",
            example="[error]  * method parse()Int in class app.Parser does not have a correspondent in current version")),
        ("error", r"^\[error\] \S.*", _o(weight=64, hint="[error]", needs_marker=True, example="[error] (Compile / compileIncremental) javac returned non-zero exit code")),
        ("tests_failed", r"^\[info\] \*\*\* \d+ TESTS? FAILED \*\*\*", _o(kind="summary", weight=35, hint="failed",
                                                                           example="[info] *** 1 TEST FAILED ***")),
    ],
)

ELIXIR = _table(
    "elixir",
    (('mix ', r"^(?:\$ )?mix "), ('finished in ', r"^Finished in [\d.]+ seconds \("), ('==> ', r"^==> \w+$"), ('compiling ', r"^Compiling \d+ files? \(\.exs?\)")),
    [
        ("compile_banner", r"^== Compilation error in file \S+ ==$", _o(weight=88, hint="compilation error in file",
                                                                         example="== Compilation error in file lib/app/parser.ex ==")),
        ("exception", r"^\*\* \(\w+(?:\.\w+)*\) \S.*", _o(weight=90, hint="** (", example="** (CompileError) lib/app.ex:3: undefined function parse/1")),
        ("exunit", r"^\s+\d+\) test .+ \([\w.]+\)$", _o(kind="failure", weight=84, hint=") test ",
                                                        example="  1) test parses numbers (App.ParserTest)")),
        ("summary", r"^\d+ (?:doctests?, )?(?:\d+ )?tests?, [1-9]\d* failures?", _o(kind="summary", weight=35, hint="failure",
                                                                                  example="10 tests, 1 failure")),
    ],
)

HASKELL = _table(
    "haskell",
    (('^cabal |^$ cabal ', r"^(?:\$ )?cabal "), ('^stack |^$ stack ', r"^(?:\$ )?stack (?:build|test|setup)"),
     ('^preprocessing ', r"^Preprocessing (?:library|executable|test suite) ")),
    [
        # GHC puts the message on the lines after the position: the signature reads the next line too.
        ("ghc", r"^\S+\.l?hs:(?:\d+:\d+(?:-\d+)?|\(\d+,\d+\)-\(\d+,\d+\)): error:",
         _o(weight=90, hint=".hs:", with_next=True, example="src/Parser.hs:38:10: error:")),
        # A warning fails the build under -Werror ("Failing due to -Werror."): weak evidence, the best a
        # build whose only complaint is a warning has.
        ("ghc_warning", r"^\S+\.l?hs:(?:\d+:\d+(?:-\d+)?|\(\d+,\d+\)-\(\d+,\d+\)): [Ww]arning:",
         _o(weight=34, hint=".hs:", with_next=True, example="src/Parser.hs:94:10: Warning:")),
        ("cabal", r"^(?:cabal(?:\.exe)?|stack): (?!warning)\S.*", _o(weight=70, hint="cabal: |cabal.exe: |stack: ", needs_marker=True,
                                                               example="cabal: Could not resolve dependencies:")),
    ],
)

ERLANG = _table(
    "erlang",
    (('^rebar|^$ rebar|^./rebar|^$ ./rebar', r"^(?:\$ )?(?:\./)?rebar3? "), ('===> ', r"^===> (?:Verifying|Compiling|Fetching|Analyzing)"), ('erlc ', r"\berlc "),
     ('ct_run', r"\bct_run\b"), ('common test', r"Common Test")),
    [
        ("compile", r"^\S+\.[eh]rl:\d+:(?:\d+:)? (?![Ww]arning:)\S.*", _o(weight=88, hint=".erl:|.hrl:",
                                                                       example="src/app_parser.erl:91: variable 'Tokens' is unbound")),
        # The verdict names the function that failed; the "Reason:" line below tells failures apart.
        ("ct_failed", r"^\w+:\w+ failed on line \d+$", _o(kind="failure", weight=82, hint="failed on line", with_next=True,
                                                          example="parser_SUITE:parses_numbers failed on line 42")),
        ("ct_case_failed", r"^%%% \w+ ==> \w+: FAILED$", _o(kind="failure", weight=80, hint="==> ",
                                                          example="%%% parser_SUITE ==> parses_numbers: FAILED")),
        ("ct_summary", r"TEST COMPLETE, [1-9]\d* failed", _o(kind="summary", weight=35, hint="test complete",
                                                           example="Testing app.parser: TEST COMPLETE, 1 failed, 2 skipped of 40 test cases")),
        ("eunit", r"^\s*\w+: \w+\.\.\.\*failed\*$", _o(kind="failure", weight=82, hint="*failed*",
                                                        example="app_parser_tests: parse_test...*failed*")),
    ],
)

R = _table(
    "r",
    (('* checking ', r"^\* checking "), ('* installing ', r"^\* installing "), ('r cmd ', r"\bR CMD (?:check|build|INSTALL)\b"),
     ('testthat', r"\btestthat\b")),
    [
        ("tests_failed", r"^Running the tests in [‘'][^’']+[’'] failed\.$", _o(kind="failure", weight=82, hint="running the tests in",
                                                                             example="Running the tests in ‘tests/testthat.R’ failed.")),
        # "* checking X ... ERROR" heads the lines that say what is wrong.
        ("check_error", r"^\* checking .+ \.\.\. ERROR$", _o(kind="failure", weight=80, hint="* checking ", points_next=True,
                                                            example="* checking examples ... ERROR")),
        # Suggested packages only give a NOTE; a required one stops the check.
        ("not_available", r"^Packages? required(?: and available)? but not available: ",
         _o(weight=88, hint="but not available", example="Package required but not available: ‘jsonlite’")),
        ("testthat_failure", r"^\s*(?:── )?(?:\d+\. (?:Failure|Error)(?: \([^)]*\))?: |(?:Failure|Error) \([^)]+\): )\S",
         _o(kind="failure", weight=80, hint="failure|error", needs_marker=True,
            example="── 1. Failure: parses numbers (@test-parser.R#12) ──────────")),
    ],
)

EMACS = _table(
    "emacs",
    (('debugger entered', r"^Debugger entered--"), ('^emacs |^$ emacs ', r"^(?:\$ )?emacs "), (' tests (', r"^Running \d+ tests? \("), ('.el', r"^Loading \S+\.el\b")),
    [
        # The header names the error; its first backtrace frame ("signal(error ...)") says it again
        # together with where it was raised, and is the line to show.
        ("lisp_error", r"^Debugger entered--Lisp error: \(\S.*", _o(kind="error", weight=88, hint="debugger entered--lisp error",
                                                                  points_next=True, example="Debugger entered--Lisp error: (void-function parse)")),
        # A backtrace printed without its header still starts with the frame that signalled the error.
        ("signal_frame", r"^\s+signal\([\w-]+ \S.*\)$", _o(weight=86, hint="signal(",
                                                           example="  signal(error (\"Package `emacs-27.1' is unavailable\"))")),
        ("byte_compile", r"^\S+\.el:\d+:\d+:\s?Error: \S.*", _o(weight=88, hint=".el:", example="parser.el:12:1:Error: Symbol’s value as variable is void: tokens")),
        ("ert_failed", r"^\s+FAILED\s+\d+/\d+\s+\S+", _o(kind="failure", weight=80, hint="failed ",
                                                          example="   FAILED  2/5  parser-test-numbers")),
        ("ert_summary", r"^Ran \d+ tests?, \d+ results? as expected, [1-9]\d* unexpected", _o(kind="summary", weight=40, hint="results as expected",
                                                                                           example="Ran 5 tests, 4 results as expected, 1 unexpected")),
    ],
)

VIM = _table(
    "vim",
    (('vader', r"\bVader\b"), ('test results:', r"^Test results:$"), ('executed ', r"^Executed \d+ tests? in ")),
    [
        ("found_errors", r"^\s*Found errors in \S+\(\):$", _o(kind="failure", weight=84, hint="found errors in",
                                                          example="Found errors in Test_parse_numbers():")),
        ("old_test", r"^\s*test\w+ FAILED$", _o(kind="failure", weight=70, hint="failed$", needs_marker=True, example="test72 FAILED")),
        ("vader_failed", r"^\s*\(\s*\d+/\d+\) \[[ A-Z]+\] \(X\) \S.*", _o(kind="failure", weight=84, hint="(x) ",
                                                                        example="    ( 53/138) [EXECUTE] (X) parses numbers")),
    ],
)

GTEST = _table(
    "gtest",
    (('[==========] running', r"^\[==========\] Running \d+ tests?"), ('[  passed  ]', r"^\[  PASSED  \] \d+ tests?")),
    [
        ("failure", r"^\S+(?::\d+:|\(\d+\):) Failure$", _o(weight=86, hint=": failure|): failure", example="test/parser_test.cc:42: Failure")),
        # googletest's verdict, also used by Neovim's busted output handler ("[  ERROR   ] spec.lua @ 12: name").
        ("failed", r"^\[  (?:FAILED|ERROR) {1,3}\] (?!\d+ tests?, listed below)\S.*", _o(kind="failure", weight=80, hint="[  failed  ]|[  error   ]",
                                                                                   example="[  FAILED  ] ParserTest.RejectsEmptyInput (3 ms)")),
        ("summary", r"^\[  FAILED  \] \d+ tests?, listed below:$", _o(kind="summary", weight=35, hint="listed below",
                                                                   example="[  FAILED  ] 1 test, listed below:")),
    ],
)

LUA = _table(
    "lua",
    (('busted', r"\bbusted\b"), ('successes / ', r"^\d+ success(?:es)? / \d+ failures? / "), ('^lua|^$ lua', r"^(?:\$ )?(?:lua|luajit|luarocks) ")),
    [
        ("busted", r"^(?:Failure|Error) (?:→|->) \S+ @ \d+", _o(kind="failure", weight=84, hint="failure →|error →|failure ->|error ->",
                                                              example="Failure → spec/parser_spec.lua @ 12")),
        ("busted_summary", r"^\d+ success(?:es)? / (?:[1-9]\d* failures? / \d+|\d+ failures? / [1-9]\d*) errors?",
         _o(kind="summary", weight=35, hint="successes / |success / ", example="10 successes / 1 failure / 0 errors / 0 pending : 0.2 seconds")),
        ("runtime", r"^(?:lua|luajit|luvit|resty)(?:\d[\d.]*)?: \S+:\d+: \S.*", _o(weight=86, hint="lua: |luajit: |luvit: |resty: ",
                                                                               example="lua: src/parser.lua:12: attempt to index a nil value (local 'token')")),
    ],
)

CLOJURE = _table(
    "clojure",
    (('^lein |^$ lein ', r"^(?:\$ )?lein "), ('tests containing|test containing', r"^Ran \d+ tests? containing \d+ assertions?\.$")),
    [
        ("test_failed", r"^(?:FAIL|ERROR) in \(\S+\) \(\S+:\d+\)", _o(kind="failure", weight=84, hint="fail in (|error in (",
                                                                  example="FAIL in (parses-numbers) (parser_test.clj:12)")),
        ("syntax", r"^Syntax error (?:compiling|macroexpanding|reading source)\b.* at \(\S+:\d+(?::\d+)?\)", _o(weight=88, hint="syntax error ",
                                                                                                   example="Syntax error compiling at (app/parser.clj:12:1).")),
        ("summary", r"^\d+ failures?, \d+ errors?\.$", _o(kind="summary", weight=35, hint="failures, |failure, ",
                                                       example="1 failures, 0 errors.")),
    ],
)

XCODE = _table(
    "xcode",
    (('^▸ building|^▸ linking|^▸ running', r"^▸ (?:Building|Linking|Running)"), ('xcodebuild', r"\bxcodebuild\b"),
     ('test suite ', r"^Test Suite '.+' (?:started|passed|failed) at ")),
    [
        ("xcpretty_failed", r"^\s*✗ \S.*", _o(kind="failure", weight=72, hint="✗", needs_marker=True,
                                             example="    ✗ testParseEmptyInput, XCTAssertEqual failed: (\"0\") is not equal to (\"1\")")),
        # xcpretty's summary at the end of the run: each failure again, under its class, with the
        # file and line of the failed assertion below it.
        ("xcpretty_summary", r"^  test\w*, \S.*", _o(kind="failure", weight=74, hint="^  test", needs_marker=True,
                                                   example="  testParseEmptyInput, XCTAssertEqual failed: (\"0\") is not equal to (\"1\")")),
        ("test_case_failed", r"^Test Case '-\[\S+ \S+\]' failed", _o(kind="failure", weight=80, hint="test case '",
                                                                    example="Test Case '-[AppTests.ParserTests testParseEmptyInput]' failed (0.012 seconds).")),
        ("build_failed", r"^\*\* (?:BUILD|TEST|ARCHIVE|ANALYZE) FAILED \*\*$", _o(kind="summary", weight=35, hint="failed **",
                                                                              example="** TEST FAILED **")),
    ],
)

LATEX = _table(
    "latex",
    (('this is pdftex|this is xetex|this is luatex|this is luahbtex', r"^This is (?:pdf|Xe|Lua|LuaHB)TeX, Version "), ('latexmk', r"^Latexmk: "), ('latex2e <', r"^LaTeX2e <")),
    [
        ("error", r"^! \S.*", _o(weight=88, hint="^! ", needs_marker=True, example="! Undefined control sequence.")),
        ("latex_error", r"(?:La)?TeX Error: \S.*|^! LaTeX Error: \S.*", _o(weight=90, hint="tex error: ",
                                                                       example="! LaTeX Error: File `tikz.sty' not found.")),
        # Latexmk's "Summary of warnings" lists warnings, not the error that stopped the build.
        ("latexmk_warning", r"^\s*Latex failed to resolve \d+ (?:reference|citation)\(s\)", _o(kind="cascade", weight=100, hint="latex failed to resolve",
                                                                                           example="  Latex failed to resolve 12 reference(s)")),
    ],
)

PURESCRIPT = _table(
    "purescript",
    (('purs |pulp |spago ', r"^(?:\$ )?(?:npx )?(?:purs|pulp|spago) "),),
    [
        # "Error found:" / "Error 1 of 3:" head the module, position and message lines.
        ("error", r"^\s*Error (?:found|\d+ of \d+):$", _o(weight=82, hint="error found:|error 1 of|error 2 of|error 3 of|error 4 of|error 5 of|error 6 of|error 7 of|error 8 of|error 9 of", with_next=True, example="Error found:")),
    ],
)

PESTER = _table(
    "pester",
    (("[+] ", r"^\s*\[\+\] \S"), ("describing ", r"^\s*Describing \S"), ("invoke-pester", r"(?i)\bInvoke-Pester\b")),
    [
        ("failed_test", r"^\s*\[-\] \S.*", _o(kind="failure", weight=84, hint="[-] ", needs_marker=True,
                                                example="  [-] parses numbers 12ms")),
        ("summary", r"^Tests Passed: \d+,? Failed: [1-9]", _o(kind="summary", weight=35, hint="tests passed:",
                                                               example="Tests Passed: 40, Failed: 1, Skipped: 0")),
    ],
)

TAP = _table(
    "tap",
    (('1..', r"^1\.\.\d+$"), ('ok 1|ok 2|ok 3|ok 4|ok 5|ok 6|ok 7|ok 8|ok 9', r"^ok \d+ "), ('# tests |# pass |# fail ', r"^# (?:tests|pass|fail) \d+"), ('.t ..', r"^t/\S+\.t \.\.+")),
    [
        ("bail_out", r"^\s*Bail out!\s+\S.*", _o(weight=86, hint="bail out!", example="Bail out! database not reachable")),
        ("not_ok", r"^\s*not ok \d+\b", _o(kind="failure", weight=80, hint="not ok", block_below=True, example="not ok 3 - parses numbers")),
        ("perl_failed_test", r"^#\s+Failed test (?:'|at |in )", _o(weight=82, hint="failed test", example="#   Failed test 'parses numbers'")),
        ("dubious", r"Dubious, test returned [1-9]", _o(kind="failure", weight=76, hint="dubious",
                                                       example="t/parse.t .. Dubious, test returned 1 (wstat 256, 0x100)")),
        ("perl_module", r"^Can't locate \S+\.pm in @INC", _o(weight=90, hint="can't locate",
                                                          example="Can't locate JSON/XS.pm in @INC (you may need to install the JSON::XS module)")),
        ("perl_begin", r"^BEGIN failed--compilation aborted", _o(kind="cascade", weight=100, hint="begin failed",
                                                              example="BEGIN failed--compilation aborted at t/basic.t line 3.")),
        ("sharness_summary", r"^# failed [1-9]\d* among \d+ test", _o(kind="summary", weight=40, hint="# failed",
                                                                    example="# failed 1 among 40 test(s)")),
        ("perl_die", r"\S.* at \S+ line \d+\.$", _o(weight=66, hint=" line ", needs_marker=True,
                                                     example="t/basic.t .. Connection refused at t/basic.t line 17.")),
        ("prove_summary", r"^(?:Failed \d+/\d+ (?:test programs|subtests)|Result: FAIL|# fail\s+[1-9])",
         _o(kind="summary", weight=40, hint="fail", example="Failed 1/13 subtests")),
    ],
)

LINT = _table(
    "lint",
    (('✖', r"^\s*✖ \d+ problems?"), ('eslint', r"\beslint\b"), ('flake8', r"\bflake8\b"), ('shellcheck', r"\bshellcheck\b"), ('prettier', r"\bprettier\b"), ('stylelint', r"\bstylelint\b"), ('markdownlint', r"\bmarkdownlint\b")),
    [
        ("eslint_line", r"^\s+\d+:\d+\s+(?:error|✖)\s+\S.*", _o(weight=80, hint="error|✖",
                                                                example="  3:8  error  'parse' is defined but never used  no-unused-vars")),
        ("eslint_summary", r"^\s*✖ \d+ problems? \(\d+ errors?", _o(kind="summary", weight=40, hint="problem",
                                                                    example="✖ 3 problems (3 errors, 0 warnings)")),
        ("flake8", r"^\S+\.py:\d+:\d+: [EFWC]\d{3} \S.*", _o(weight=80, hint=".py:", example="app/main.py:3:1: F401 'os' imported but unused")),
        ("shellcheck", r"\bSC\d{4}\b", _o(weight=76, hint="sc1|sc2|sc3", example="In deploy.sh line 3: SC2086: Double quote to prevent globbing")),
        ("markdownlint", r"^\S+\.md:? ?\d+(?::\d+)?:? MD\d{3}", _o(weight=80, hint=".md", example="docs/index.md:12 MD012/no-multiple-blanks Multiple consecutive blank lines")),
        ("tslint", r"^(?:ERROR: )?(?:\(\S+\) )?\S+\.[jt]sx?\[\d+, \d+\]: \S.*", _o(weight=82, hint=".ts[|.js[|.tsx[|.jsx[",
                                                                           example="ERROR: (semicolon) src/app/parser.ts[12, 5]: Missing semicolon")),
        ("prettier", r"(?:Code style issues found|Forgot to run Prettier\?)", _o(kind="summary", weight=56, hint="code style issues|forgot to run prettier",
                                                                                 example="[warn] Code style issues found in the above file. Forgot to run Prettier?")),
    ],
)

MOZILLA = _table(
    "mozilla",
    (('test-pass|test-start|test-info|test-ok', r"TEST-(?:PASS|START|INFO|OK) \|"), ('[taskcluster', r"^\[taskcluster[ :]"), ('mozharness', r"mozharness")),
    [
        ("unexpected", r"TEST-UNEXPECTED-\w+", _o(kind="failure", weight=86, hint="test-unexpected-",
                                                  example="TEST-UNEXPECTED-FAIL | dom/tests/test_parse.html | expected 3, got 4")),
        ("crash", r"PROCESS-CRASH \||Hit MOZ_CRASH\(|###!!! ABORT:|Assertion failure: \S", _o(weight=88, hint="process-crash|moz_crash|abort:|assertion failure",
                                                                                             example="PROCESS-CRASH | application crashed [@ parse] | dom/tests/test_parse.html")),
        ("taskcluster", r"^\[taskcluster:error\] (?!exit status)\S.*", _o(weight=70, hint="[taskcluster:error]",
                                                                          example="[taskcluster:error] Task aborted - max run time exceeded")),
        ("taskcluster_exit", r"^\[taskcluster:error\] exit status \d+", _o(kind="exit", weight=100, hint="[taskcluster:error]",
                                                                            example="[taskcluster:error] exit status 1")),
        ("level_error", r"^(?:ERROR|CRITICAL|FATAL) - +\S.*", _o(weight=52, hint="error - |critical - |fatal - ", field="text",
                                                               example="ERROR - Automation Error: mozprocess timed out")),
        ("leak", r"\bleakcheck\b.*\bleaked\b|YOU ARE LEAKING THE WORLD", _o(weight=60, hint="leak",
                                                                            example="WARNING: YOU ARE LEAKING THE WORLD (at least one JSRuntime)")),
    ],
)

AWESOME_BOT = _table(
    "awesome_bot",
    (('checking links', r"^> Checking links in "), ('links to check', r"^Links to check: \d+"), ('awesome_bot', r"awesome_bot")),
    [
        ("issues", r"^Issues :-\(", _o(kind="summary", weight=75, hint="issues :-(", points_next=True, example="Issues :-(")),
        ("link", r"^\s*\d+\. (?:\[L\d+\] )?(?!2\d\d)\d{3} https?://\S+", _o(needs_marker=True, kind="failure", weight=70, hint="] 1|] 2|] 3|] 4|] 5|. 1|. 2|. 3|. 4|. 5",
                                                                  example="  1. [L0042] 404 https://example.org/gone")),
    ],
)

GENERIC = _table(
    "generic",
    (),
    [
        # Exit codes and boiler-plate that are consequences of an earlier error.
        ("ci_exit", r"^(?:##\[error\])?(?:Error: )?Process completed with exit code [1-9]\d*|^The command \".*\" (?:failed and )?exited with [1-9]\d*|"
                    r"^(?:Done\. )?Your build exited with [1-9]|^ERROR: Job failed: |^Error: The operation was canceled",
         _o(kind="exit", weight=100, hint="process completed with exit code|exited with|your build exited|job failed|operation was canceled", example="##[error]Process completed with exit code 1.")),
        # A step that reports success: what it printed did not fail the job.
        ("ci_exit_ok", r"^The command \".*\" exited with 0\.?$",
         _o(kind="cascade", weight=100, hint="exited with 0", step_ok=True, example="The command \"pushd source\" exited with 0.")),
        ("exit_code", r"(?i)\b(?:exit(?:ed)? (?:with )?(?:code|status)|exited with(?= [1-9])|returned (?:a )?non-zero (?:exit )?(?:code|status)|"
                      r"exit status)[:= ]+[1-9]\d*\b",
         _o(kind="exit", weight=60, hint="exit|non-zero", example="script exited with code 2")),
        # Informational and warning lines: heavier tool rules still win, weak generic evidence does not.
        ("info_line", r"^(?:info|INFO|Info|notice|NOTICE|note|NOTE|debug|DEBUG|warning|WARNING|Warning|WARN|warn)\b:?\s",
         _o(kind="cascade", weight=65, hint="^info|^notice|^note|^debug|^warn", example="info \"fsevents@1.2.4\" is an optional dependency and failed compatibility check.")),
        ("info_level", r"^(?:INFO|DEBUG|TRACE) +- |^\[taskcluster:(?:warn|info)\b|^level=(?:info|debug)\b",
         _o(kind="cascade", weight=65, hint="info -|debug -|trace -|[taskcluster:warn|[taskcluster:info|level=info|level=debug",
            field="text", example="INFO - retry: Calling run_command with args: [['tool', 'no such file']]")),
        ("logfmt_error", r"^(?:time=\S+ )?level=(?:error|fatal|panic) msg=\S.*", _o(weight=70, hint="level=error|level=fatal|level=panic",
                                                                                 example="level=error msg=\"Running error: context loading failed: no go files to analyze\"")),
        ("gha_annotation", r"^##\[error\](?!Process completed)\S.*|^::error(?: [^:]*)?::\S.*",
         _o(weight=70, hint="##[error]|::error", example="##[error]Unable to locate executable file: node")),
        # Compiler-style diagnostics every toolchain prints: file:line[:col]: error: message
        ("compiler_error", r"^\s*\S+?[:(]\d+(?:[,:]\d+)?\)?:? (?:fatal )?error(?: [A-Z]+\d+)?:? \S.*",
         _o(weight=88, hint="error", example="lib/parse.ml:12:5: error: unbound value parse")),
        # git could not fetch or check out what the build needs: the root cause of the "No such file"
        # lines that follow ("cd: vim: No such file or directory").
        ("git_remote", r"^(?:fatal|error): (?:unable to access '[^']+'|repository '[^']+' not found|Could not read from remote repository|"
                       r"Authentication failed for|could not read Username|the remote end hung up unexpectedly|early EOF|"
                       r"remote error: |[Cc]ouldn't find remote ref |Remote branch \S+ not found|reference is not a tree|"
                       r"pathspec '[^']*' did not match|RPC failed|unable to checkout working tree)",
         _o(weight=76, hint="fatal: |error: ", example="fatal: unable to access 'https://example.org/x.git/': Could not resolve host: example.org")),
        ("error_prefix", r"^\s*(?:ERROR|Error|error|FATAL|Fatal|fatal)(?:\[[\w-]+\])?(?: in [^:]+)?\s?:\s*\S.*",
         _o(weight=58, hint="error|fatal", example="fatal: no upstream configured for branch 'main'")),
        ("fail_prefix", r"^\s*(?:FAIL|FAILED|Fail|Failed|fail|failed)\s*[:!]\s*(?!\d)\S.*",
         _o(kind="failure", weight=62, hint="fail", example="fail: [string \"codec.lua\"]:12: no such hash")),
        ("tool_error", r"^[\w.+-]+: (?:fatal )?error: \S.*", _o(weight=60, hint="error: ",
                                                                example="xcodebuild: error: Unable to find a destination matching the provided destination specifier")),
        ("xcode_error", r"❌\s+\S+:\d+:\d+: \S.*", _o(weight=88, hint="❌", example="❌  /src/App/Parser.swift:97:2: unknown attribute 'memberwise'")),
        ("limit_exceeded", r"(?i)\blimit (?:has )?(?:been )?exceeded\b|\bexceed(?:s|ed)? the (?:\w+ ){0,2}limit\b",
         _o(weight=60, hint="exceeded|exceed", example="Package size limit has exceeded by 12 kB")),
        ("status_column", r"^\s*\S(?:.*\S)?\s{2,}(?:FAIL|FAILED|ERROR)(?: \([\d.]+m?s\))?$", _o(kind="failure", weight=66, hint="fail$|failed$|error$|fail (",
                                                                             example="parser/numbers              FAIL")),
        # A test result line that says the test passed ("unknown option:     OK") explains no failure.
        ("passed_line", r"^\s*\S.*\s(?:OK|ok|PASS|PASSED|passed)(?: \([\d.]+m?s\))?$", _o(kind="pass", weight=75, hint="ok$|pass$|passed$|ok (|pass (|passed (",
                                                                   example="unknown option rejected:     OK")),
        ("shell_syntax", r"\bsyntax error(?: near unexpected token\b|: unexpected end of file\b)", _o(weight=72, hint="syntax error",
                                                                                           example="./ci/build.sh: line 12: syntax error near unexpected token `fi'")),
        ("usage_error", r"(?i)^\s*(?:usage error|flag provided but not defined|unknown (?:option|flag|command|argument)|"
                        r"invalid option|unrecognized (?:option|arguments?)|illegal option|(?:illegal|invalid|unknown) switch|"
                        r"invalid argument \"[^\"]*\" for(?= ))\b",
         _o(weight=70, hint="usage error|flag provided but not defined|unknown option|unknown flag|unknown command|unknown argument|invalid option|unrecognized|illegal option|illegal switch|invalid switch|unknown switch|invalid argument \"",
            example="flag provided but not defined: -verbose")),
        ("exception_line", r"^\s*(?:[\w.$]+\.)?[A-Z]\w*(?:Error|Exception)\b(?::\s?\S.*)?$",
         _o(weight=66, hint="error|exception", example="ParseError: unexpected end of input")),
        ("assertion", r"(?i)^\s*(?:Assertion(?:Error)? failed|assertion failed|Assert\.\w+\(\) Failure)\b",
         _o(weight=72, hint="assertion failed|assertionerror failed|() failure", example="Assertion failed: (n > 0), function parse, file parse.c, line 12.")),
        ("crash", r"(?i)\b(?:segmentation fault|core dumped|bus error|stack overflow|out of memory|oomkilled|killed by signal|"
                  r"fatal signal|abort trap|illegal instruction)\b|^(?:\S+: line \d+: +\d+ )?Killed\b(?: +\S.*)?$",
         _o(weight=70, hint="segmentation|core dumped|bus error|stack overflow|out of memory|oomkilled|killed by signal|fatal signal|abort trap|illegal instruction|killed",
           example="./app: Segmentation fault (core dumped)")),
        ("not_found", r"(?i)(?:command not found|no such file or directory|permission denied|connection refused|"
                      r"could not resolve host|name or service not known|no space left on device|cannot open shared object)",
         _o(weight=62, hint="command not found|no such file|permission denied|connection refused|could not resolve host|service not known|no space left|shared object",
           example="./build.sh: line 3: cmake: command not found")),
        ("cannot", r"(?i)\b(?:cannot|can't|could not|couldn't|unable to|failed to)\b\s+\S",
         _o(weight=40, hint="cannot|can't|could not|couldn't|unable to|failed to", example="Could not open input file: artisan")),
        ("test_failed", r"(?i)\b(?:tests?|specs?|examples?|checks?)\b.*(?<![\w/.-])(?<!\b0 )fail(?:ed|ure|ures|ing)?(?![\w-]|\.\w)|(?-i:(?<![\w/.-])FAIL(?:ED)?\b(?:[:!]?\s+\S|\s*$))|\[FAIL\]|✗|✘|✖|❌",
         _o(kind="failure", weight=34, hint="fail|✗|✘|✖|❌", example="✗ parses numbers")),
        ("file_line_message", r"^(?:\./)?[\w./\\-]+\.[A-Za-z]\w{0,7}:\s?\d+(?::\d+)?(?::|\s)\s*\S.*",
         _o(weight=34, hint=".md:|.py:|.js:|.ts:|.rb:|.go:|.c:|.h:|.cc:|.cpp:|.hpp:|.java:|.kt:|.scala:|.swift:|.m:|.mm:|.rs:|.php:|.vim:|.lua:|.pl:|.pm:|.sh:|.txt:|.yml:|.yaml:|.json:|.ex:|.exs:|.erl:|.hs:|.clj:|.el:|.ml:|.r:|.tex:|.coffee:|.css:|.scss:|.sass:|.less:|.html:|.vue:|.jsx:|.tsx:|.cs:|.fs:|.dart:|.groovy:|.rst:|.xml:|.toml:|.ini:|.cfg:", example="README.md:12: line longer than 80 characters")),
        ("warning_as_error", r"(?i)\bwarnings? (?:being )?treated as errors?\b",
         _o(weight=60, hint="treated as error", example="cc1: all warnings being treated as errors")),
        ("timeout", r"(?i)\b(?:timed out|timeout exceeded|deadline exceeded|took too long|no output has been received in the last)\b",
         _o(weight=56, hint="timed out|timeout exceeded|deadline exceeded|took too long|no output has been received", example="No output has been received in the last 10m0s, this potentially indicates a stalled build.")),
        # Weak evidence: only counts when the log also ends a step with a failing exit code.
        ("error_word", r"(?i)(?<![\w/.-])(?<!\b0 )(?<!\bno )(?:error|errors|fatal|critical)(?![\w-]|\.\w)",
         _o(weight=24, hint="error|fatal|critical", example="something reported an error while parsing")),
        ("fail_word", r"(?i)(?<![\w/.-])(?<!\b0 )(?<!\bno )(?:fail|fails|failed|failure|failures|failing|exception|panic|panicked|broken)(?![\w-]|\.\w)",
         _o(weight=22, hint="fail|exception|panic|broken", example="the parser failed on input 3")),
    ],
)

# Order matters only for ties between tables (same weight, same line): earlier tables win.
TOOL_TABLES: tuple[ToolRules, ...] = (
    NPM, YARN, PNPM, JEST, MOCHA, KARMA, JASMINE, NODE, CARGO, GO, PYTEST, PYTHON, PIP, MAVEN, GRADLE, JAVA, MAKE, GCC, DOCKER,
    KUBECTL, KUBERNETES, TERRAFORM, HELM, RUBY, PHP, DOTNET, SBT, ELIXIR, HASKELL, PURESCRIPT, ERLANG, R, EMACS, VIM, GTEST, LUA,
    CLOJURE, XCODE, LATEX, PESTER, TAP, LINT,
    MOZILLA, AWESOME_BOT, GENERIC,
)

KNOWN_TOOLS: tuple[str, ...] = tuple(t.tool for t in TOOL_TABLES)

# Other names people use for the same tool table.
TOOL_ALIASES: dict[str, str] = {
    "rustc": "cargo", "rust": "cargo", "golang": "go", "py": "python", "python3": "python", "pip3": "pip",
    "mvn": "maven", "javac": "java", "junit": "java", "gradlew": "gradle", "clang": "gcc", "g++": "gcc", "cc": "gcc",
    "ld": "gcc", "cmake": "make", "k8s": "kubernetes", "kube": "kubernetes", "tf": "terraform", "nodejs": "node",
    "node.js": "node", "yarnpkg": "yarn", "rspec": "ruby", "minitest": "ruby", "bundler": "ruby", "phpunit": "php",
    "composer": "php", "scala": "sbt", "mix": "elixir", "prove": "tap", "perl": "tap", "eslint": "lint",
    "flake8": "lint", "ghc": "haskell", "cabal": "haskell", "stack": "haskell", "rebar": "erlang", "rebar3": "erlang",
    "erl": "erlang", "rscript": "r", "elisp": "emacs", "vimscript": "vim", "tex": "latex", "latexmk": "latex",
    "purs": "purescript", "googletest": "gtest", "busted": "lua", "luajit": "lua", "lein": "clojure",
    "leiningen": "clojure", "xcodebuild": "xcode", "xcpretty": "xcode", "swift": "xcode", "auto": "auto",
}
