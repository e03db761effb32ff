"""CacheAligner and the cache-aligned prompt builder."""

from __future__ import annotations

from shared.optimizer.align import CTX_LINE_PREFIX, MAX_VALUES_PER_NAME, align_dynamic
from shared.optimizer.ccr import ccr_hash, ccr_marker
from shared.optimizer.prompt import PromptPiece, build_prompt, split_trailer

RUN_TEMPLATE = """{ts1} INFO checkout {sha} for run_id={run}
{ts2} ERROR tests/test_api.py:41: AssertionError after {dur}
{ts2} ERROR upload to /tmp/{tmp}/report.xml failed, request {uuid}
"""


def _run(ts1: str, ts2: str, sha: str, run: str, dur: str, tmp: str, uuid: str) -> str:
    return RUN_TEMPLATE.format(ts1=ts1, ts2=ts2, sha=sha, run=run, dur=dur, tmp=tmp, uuid=uuid)


FIRST = _run("2025-03-14T09:12:01Z", "2025-03-14T09:12:13Z", "3f9c2ab1", "881234", "0.71s", "pytest-of-ci/pytest-3",
             "5b0f5a3e-8f0e-4c5e-9a7d-0c2a3d1e4f55")
SECOND = _run("2025-03-15T17:40:55Z", "2025-03-15T17:41:09Z", "9e8d7c6b", "881999", "1.32s", "pytest-of-ci/pytest-9",
              "0d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d")


def test_aligned_bodies_are_identical_across_runs() -> None:
    first, second = align_dynamic(FIRST), align_dynamic(SECOND)
    assert first.body == second.body
    assert first.text != second.text  # the values differ, and only in the trailing line
    assert first.text.splitlines()[:-1] == second.text.splitlines()[:-1]


def test_values_move_to_a_trailing_ctx_line() -> None:
    aligned = align_dynamic(FIRST)
    last = aligned.text.splitlines()[-1]
    assert last.startswith(CTX_LINE_PREFIX)
    for value in ("2025-03-14T09:12:01Z", "3f9c2ab1", "881234", "0.71s", "5b0f5a3e-8f0e-4c5e-9a7d-0c2a3d1e4f55"):
        assert value not in aligned.body
        assert value in last
    # Source positions identify the failure, not the run: they stay in the text.
    assert "tests/test_api.py:41" in aligned.body


def test_ctx_line_deduplicates_and_bounds_values() -> None:
    log = "\n".join(f"2025-03-14T09:12:{i:02d}Z step {i} took 3s" for i in range(40))
    aligned = align_dynamic(log)
    ctx = aligned.ctx_line
    assert ctx.count("3s") == 1  # the same duration 40 times is listed once
    timestamps = ctx.split("timestamp=")[1].split(";")[0].split(", ")
    assert len(timestamps) == MAX_VALUES_PER_NAME
    assert "2025-03-14T09:12:00Z" in ctx and "2025-03-14T09:12:39Z" in ctx


def test_text_without_dynamic_values_is_unchanged() -> None:
    aligned = align_dynamic("nothing run-specific here")
    assert aligned.text == "nothing run-specific here"
    assert aligned.ctx_line == ""


def test_split_trailer_separates_ctx_and_marker() -> None:
    text = "body line\nsecond\n[ctx: sha=abc1234]\n" + ccr_marker("1" * 29)
    body, trailer = split_trailer(text)
    assert body == "body line\nsecond"
    assert trailer == ["[ctx: sha=abc1234]", ccr_marker("1" * 29)]


def test_prompt_order_is_stable_and_trailers_go_last() -> None:
    a1 = PromptPiece(align_dynamic(FIRST).text + "\n" + ccr_marker("1" * 29), id="log-a")
    b = PromptPiece("runbook: restart the worker", id="doc-b")
    a2 = PromptPiece(align_dynamic(SECOND).text + "\n" + ccr_marker("2" * 29), id="log-a")
    one = build_prompt(system="You are on call.", query="why did CI fail?", memory=["lesson 1"], chunks=[a1, b])
    two = build_prompt(system="You are on call.", query="why did CI fail?", memory=["lesson 1"], chunks=[b, a2])
    head_one, tail_one = one.split("## Run-specific values")
    head_two, tail_two = two.split("## Run-specific values")
    assert head_one == head_two  # same knowledge, different run and order: identical prefix
    assert tail_one != tail_two
    assert one.index("You are on call.") < one.index("## Query") < one.index("## Memory") < one.index("## Context")
    assert "log-a: [ctx: " in tail_one and "CCR:" in tail_one


def test_prompt_without_chunks_or_query() -> None:
    prompt = build_prompt(system="sys")
    assert prompt == "sys\n"


def test_a_ccr_marker_inside_a_log_is_not_taken_for_a_run_value() -> None:
    # A log that quotes an earlier compressed chunk keeps its marker usable: digits are not a SHA.
    marker = ccr_marker(ccr_hash("an earlier original"))
    aligned = align_dynamic(f"step 1 failed, see\n{marker}\nexit status 1")
    assert marker in aligned.text
