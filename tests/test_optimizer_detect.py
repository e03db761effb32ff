"""Content-type detection on the six types, binary data and the edge cases that route to passthrough."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.optimizer.detect import detect_content_type, looks_binary

FIXTURES = Path(__file__).parent / "fixtures" / "optimizer"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders.json", "json"),
        ("pytest_build.log", "log"),
        ("maven_build.log", "log"),
        ("change.diff", "diff"),
        ("inventory.py", "code"),
        ("router.go", "code"),
        ("settings.yaml", "config"),
        ("runbook.md", "text"),
    ],
)
def test_detects_each_type(name: str, expected: str) -> None:
    detection = detect_content_type((FIXTURES / name).read_text())
    assert detection.type == expected, detection


def test_json_detection_hands_over_the_parsed_value() -> None:
    detection = detect_content_type('{"a": [1, 2, 3]}')
    assert detection.type == "json"
    assert detection.json_parsed and detection.parsed_json == {"a": [1, 2, 3]}


def test_json_that_does_not_parse_is_still_json_shaped() -> None:
    detection = detect_content_type('{"name": "x", "items": [1, 2,, 3], "ok": tru}')
    assert detection.type == "json"
    assert not detection.json_parsed


def test_bracketed_log_lines_are_not_mistaken_for_json() -> None:
    text = "\n".join(f"[2025-01-02 10:00:{i:02d}] INFO worker {i} started" for i in range(20)) + "\n[done]"
    assert detect_content_type(text).type == "log"


def test_tiny_inputs_skip_magika() -> None:
    detection = detect_content_type("hello there, general kenobi")
    assert detection.type == "text"
    assert detection.detector == "heuristic"


def test_heuristics_alone_still_classify(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, expected in [("inventory.py", "code"), ("settings.yaml", "config"), ("change.diff", "diff")]:
        detection = detect_content_type((FIXTURES / name).read_text(), use_magika=False)
        assert detection.type == expected, (name, detection)
        assert detection.detector == "heuristic"


def test_binary_and_empty_input() -> None:
    assert detect_content_type("\x00\x01\x02binary\x00" * 50).type == "binary"
    assert looks_binary("\x07\x08\x0e\x0f" * 100)
    assert not looks_binary("plain text\twith tabs\n")
    empty = detect_content_type("   \n  ")
    assert (empty.type, empty.label) == ("text", "empty")
