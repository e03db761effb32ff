"""``mem optimize``: text and JSON output, stdin, type override, clear errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli.optimize  # noqa: F401  (attaches the command to the group)
from cli.app import mem
from shared.config import get_settings

FIXTURES = Path(__file__).parent / "fixtures" / "optimizer"


@pytest.fixture(autouse=True)
def _in_process_ccr(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEM_REDIS_URL", raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_optimize_file_prints_compressed_text() -> None:
    result = CliRunner().invoke(mem, ["optimize", "--file", str(FIXTURES / "pytest_build.log")])
    assert result.exit_code == 0, result.output
    assert "FAILED tests/test_api.py::test_create_widget" in result.stdout
    assert "Downloading flask" not in result.stdout
    assert "<!-- CCR:" in result.stdout
    assert result.stderr.strip().endswith(", cl100k_base)")  # the unit the counts are in


def test_optimize_counts_with_the_configured_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    file = str(FIXTURES / "orders.json")
    default = json.loads(CliRunner().invoke(mem, ["optimize", "--json", "-f", file]).stdout)["totals"]
    monkeypatch.setenv("MEM_OPTIMIZER_TOKENIZER", "embedding")
    get_settings.cache_clear()
    wordpiece = json.loads(CliRunner().invoke(mem, ["optimize", "--json", "-f", file]).stdout)["totals"]
    assert (default["tokenizer"], wordpiece["tokenizer"]) == ("cl100k_base", "embedding")
    assert wordpiece["tokens_before"] != default["tokens_before"]


def test_optimize_json_stats_for_several_files() -> None:
    result = CliRunner().invoke(
        mem, ["optimize", "--json", "-f", str(FIXTURES / "orders.json"), "-f", str(FIXTURES / "change.diff")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [c["type"] for c in data["chunks"]] == ["json", "diff"]
    for chunk in data["chunks"]:
        assert {"detector", "tokens_before", "tokens_after", "ratio", "ccr_hash", "ms"} <= set(chunk)
        assert "text" not in chunk
    assert data["totals"]["tokens_after"] < data["totals"]["tokens_before"]


def test_optimize_reads_stdin_and_honours_type_and_query() -> None:
    text = (FIXTURES / "orders.json").read_text()
    result = CliRunner().invoke(mem, ["optimize", "--type", "json", "--query", "acme-vip"], input=text)
    assert result.exit_code == 0, result.output
    assert "acme-vip" in result.stdout


def test_optimize_errors_are_clear() -> None:
    missing = CliRunner().invoke(mem, ["optimize", "--file", "/nonexistent/file.log"])
    assert missing.exit_code != 0 and "cannot read input" in missing.output
    assert "Traceback" not in missing.output


def test_optimize_too_large_input_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEM_OPTIMIZER_MAX_INPUT_BYTES", "100")
    get_settings.cache_clear()
    big = tmp_path / "big.log"
    big.write_text("x" * 500)
    result = CliRunner().invoke(mem, ["optimize", "--file", str(big)])
    assert result.exit_code != 0 and "MEM_OPTIMIZER_MAX_INPUT_BYTES" in result.output
    stdin = CliRunner().invoke(mem, ["optimize"], input="y" * 500)
    assert stdin.exit_code != 0 and "limit" in stdin.output


def test_optimize_binary_file_passes_through(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 8 + b"\x00" * 200)
    result = CliRunner().invoke(mem, ["optimize", "--json", "--file", str(blob)])
    assert result.exit_code == 0, result.output
    chunk = json.loads(result.stdout)["chunks"][0]
    assert chunk["reason"] == "binary" and chunk["decode_note"] == "binary"
