"""The log compressor keeps failure reports whole: exception reports with their dumps and traces, long
failing-test sections, banner blocks, sanitizer reports, diffs; and the line shapes it relies on."""

from __future__ import annotations

import pytest

from shared.optimizer.compress_log import SECTION_OPEN_MAX, compress_log
from shared.optimizer.log_shapes import (
    is_banner,
    is_exception_header,
    is_frame,
    is_passing_test,
    is_sanitizer_start,
)


def _noise(prefix: str, count: int) -> list[str]:
    return [f"{prefix} step {n} done" for n in range(count)]


def test_an_exception_report_keeps_its_dump_trace_and_the_test_source_after_it() -> None:
    report = [
        "  renders nested tags",
        "  AssertionError: expected output to be:",
        "<List>",
        "  <Item key={1} />",
        "</List>",
        "  but instead it was:",
        "<List>",
        "<Item key={1} />",
        "</List>",
        "    at Context.check (test/helpers.js:38:3)",
        "    at Context.<anonymous> (test/render.test.js:12:5)",
        "    at process.processImmediate (node:internal/timers:476:21)",
        "",
        "  function () {",
        "    render('<List><Item key={1} /></List>');",
        "",
        "    return check(output);",
        "  }",
    ]
    lines = ["$ npm test", *_noise("setup", 80), "1 failing", "", *report, "", *_noise("teardown", 80),
             "The command \"npm test\" exited with 1."]
    out = compress_log("\n".join(lines))
    for must in report:
        if must.strip():
            assert must.strip() in out, must
    assert "setup step 10 done" not in out and "teardown step 40 done" not in out


def test_a_header_without_a_trace_keeps_only_its_continuation() -> None:
    lines = [*_noise("build", 40), "ValueError: bad config", "  key 'port' must be a number", "",
             *_noise("later", 60), "done"]
    out = compress_log("\n".join(lines))
    assert "ValueError: bad config" in out and "key 'port' must be a number" in out
    assert "later step 30 done" not in out


def test_a_failing_tests_section_closed_by_the_next_header_is_kept_whole() -> None:
    dump = [f"[{row}][{col}] Cell {{ c: 'x', fg: Named(Foreground) }} => Cell {{ c: ' ' }}"
            for row in range(20) for col in range(20)]
    assert len(dump) > SECTION_OPEN_MAX
    lines = [*_noise("compile", 50), "failures:", "", "---- grid_scrolls stdout ----", *dump,
             "thread 'grid_scrolls' panicked at 'grid does not match', tests/ref.rs:126:9", "",
             "---- grid_wraps stdout ----", "thread 'grid_wraps' panicked at 'grid does not match', tests/ref.rs:126:9",
             "", "test result: FAILED. 16 passed; 2 failed; 0 ignored", *_noise("cleanup", 50),
             "error: test failed, to rerun pass '--test ref'"]
    out = compress_log("\n".join(lines))
    assert all(line in out for line in dump[:: len(dump) // 25])
    assert dump[-1] in out and "grid_wraps" in out
    assert "compile step 20 done" not in out and "cleanup step 20 done" not in out


def test_a_banner_right_above_an_error_keeps_the_block_to_the_next_banner() -> None:
    block = ["========DIFF========", "003+ Error: stat values differ at key: mtime", "003- bool(true)",
             "004+ array(2) {", "005+   [0]=>", "006+   int(2049)", "007+ }", "========DONE========"]
    lines = [f"PASS Test case {n} [tests/case_{n}.phpt]" for n in range(60)] + block
    lines += ["FAIL Test stat() on links [tests/stat_link.phpt]"]
    lines += [f"PASS Test case {n} [tests/more_{n}.phpt]" for n in range(60)]
    out = compress_log("\n".join(lines))
    for must in block:
        assert must in out, must
    assert "case_10.phpt" not in out and "more_30.phpt" not in out


def test_a_sanitizer_report_is_kept_to_its_aborting_line() -> None:
    report = [
        "==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x602000000010",
        "READ of size 1 at 0x602000000010 thread T0",
        "    #0 0x4f2a1b in copy_name src/names.c:41",
        "",
        "0x602000000010 is located 0 bytes inside of 16-byte region",
        "freed by thread T0 here:",
        "    #0 0x4a1c2d in free",
        "",
        "SUMMARY: AddressSanitizer: heap-use-after-free src/names.c:41 in copy_name",
        "Shadow bytes around the buggy address:",
        "  0x0c047fff8000: fa fa fd fd fa fa 00 00",
        "=>0x0c047fff8010: fa fa[fd]fd fa fa 00 00",
        "Shadow byte legend (one shadow byte represents 8 application bytes):",
        "  Addressable:           00",
        "  Freed heap region:       fd",
        "==4242==ABORTING",
    ]
    lines = [*_noise("run", 70), *report, *_noise("report", 70), "make: *** [check] Error 1"]
    out = compress_log("\n".join(lines))
    for must in report:
        if must:
            assert must in out, must
    assert "report step 30 done" not in out


def test_a_diff_in_a_log_survives_its_empty_context_lines() -> None:
    diff = ["diff --git a/docs/setup.md b/docs/setup.md", "index 82a3659..45640f1 100644", "--- a/docs/setup.md",
            "+++ b/docs/setup.md", "@@ -10,6 +10,7 @@ Install", " Install the toolchain:", " ",
            " Run the installer:", "+", " #+BEGIN_SRC shell", "   make install"]
    lines = [*_noise("fmt", 40), "PLEASE APPLY CHANGES BELOW:", *diff, *_noise("after", 40), "exited with 1"]
    out = compress_log("\n".join(lines))
    for must in diff:
        if must.strip():
            assert must.strip() in out, must


def test_context_above_an_error_steps_over_passing_tests() -> None:
    lines = [*_noise("setup", 40), "collected 13 items",
             *[f"tests/test_a.py::test_{n} PASSED [ {n}%]" for n in range(12)],
             "tests/test_a.py::test_broken FAILED", *_noise("rest", 40), "1 failed, 12 passed"]
    out = compress_log("\n".join(lines))
    assert "test_broken FAILED" in out and "collected 13 items" in out
    assert "test_11 PASSED" not in out and "test_3 PASSED" not in out


def test_many_headers_without_traces_stay_bounded() -> None:
    text = "ValueError: x\n" * 20_000 + "    at f (a.js:1:2)\n" * 2_000
    out = compress_log(text)
    assert len(out) < len(text) // 100
    assert "[×20000]" in out


@pytest.mark.parametrize(
    "line",
    [
        "    at exports.check (/home/ci/test/helpers.js:38:3)",
        "    at bootstrap_node.js:507:3",
        '  File "app/models.py", line 3, in save',
        "# /home/ci/gems/bundler/cli.rb:463:in `exec'",
        "\tfrom /app/lib/runner.rb:12:in `run'",
        "at <ScriptBlock>, /home/ci/Pester/p.ps1:43",
        "  \t/home/ci/app/main.lua:118: in function 'main'",
        "\t/go/src/app/server.go:12 +0x1d",
        "    #3 0x4fb97b in __interceptor_free asan_malloc_linux.cc:129:3",
        "=     #0 0x455083 in atomic_compare_exchange_strong sanitizer_atomic.h:12",
        "#1 /var/www/app/src/Kernel.php(12): handle()",
        "  12: 0x55d1a2b3 - std::rt::lang_start",
        "             at src/libstd/panicking.rs:12:5",
        "  --> src/parser.rs:14:9",
        "14 |     let value = parse(input);",
        "   |         ^^^^^ expected `u32`",
        "   at Acme.Orders.Service.Save() in /src/Orders/Service.cs:line 42",
        "Died at lib/Acme/Orders.pm line 12.",
        "  url-retrieve-synchronously(\"https://elpa.example.org/archive\")",
        "  (let ((available (apply oldfun package args))) (prog1 available))",
    ],
)
def test_frames_of_many_languages(line: str) -> None:
    assert is_frame(line)


@pytest.mark.parametrize(
    "line",
    ["at the moment the build is green", "Compiling widgets v0.1.0", "| a | b |", "  y: 42", "npm WARN deprecated",
     "    at least one item is required", ""],
)
def test_lines_that_are_not_frames(line: str) -> None:
    assert not is_frame(line)


def test_exception_headers_banners_sanitizers_and_passing_tests() -> None:
    assert is_exception_header("  AssertionError: expected output to be:")
    assert is_exception_header("java.lang.IllegalStateException")
    assert is_exception_header("Traceback (most recent call last):")
    assert is_exception_header("thread 'main' panicked at 'boom', src/main.rs:2:5")
    assert is_exception_header("Expected {1 2 3}, but got {}.")
    assert not is_exception_header("  Errors: 0")
    assert not is_exception_header("Error handling is described in docs/errors.md")
    assert is_banner("========DIFF========") and is_banner("===== 2 failed in 1.2s =====")
    assert is_banner("---- grid_scrolls stdout ----")
    assert not is_banner("=" * 40) and not is_banner("-- a comment --")
    assert is_sanitizer_start("==4242==ERROR: AddressSanitizer: heap-use-after-free on address 0x6")
    assert is_sanitizer_start("==77==WARNING: ThreadSanitizer: data race (pid=77)")
    for passing in ("tests/t.py::test_a PASSED [ 11%]", "ok 1 - parses", "test foo ... ok", "  ✓ renders (5ms)",
                    "[       OK ] Suite.Case (0 ms)"):
        assert is_passing_test(passing), passing
    assert not is_passing_test("tests/t.py::test_b FAILED") and not is_passing_test("token ok")
