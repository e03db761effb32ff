"""Symptom projection: the same symptom in other words lands on the same ``sym_sha``."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.diagnosis import UnknownToolError, extract_signature, project_symptom

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"


def test_same_symptom_worded_differently_has_the_same_sym_sha() -> None:
    a = project_symptom("pip", "No matching distribution found for numpy")
    b = project_symptom("pip", "pip: could not find any matching distribution of numpy!")
    assert a.keywords == b.keywords
    assert a.sym_sha == b.sym_sha


def test_abbreviations_expand() -> None:
    assert project_symptom("generic", "OOM").keywords == project_symptom("generic", "out of memory").keywords
    assert project_symptom("node", "EACCES").keywords == project_symptom("node", "permission denied").keywords
    assert project_symptom("node", "ENOENT").keywords == project_symptom("node", "not found").keywords
    assert project_symptom("generic", "unexpected EOF").keywords == project_symptom("generic", "unexpected end of file").keywords
    assert project_symptom("generic", "RC 2").keywords == project_symptom("generic", "return code 2").keywords
    assert project_symptom("npm", "ERESOLVE").keywords == ("resolv",)


def test_stop_words_drop() -> None:
    assert project_symptom("generic", "the disk is full").keywords == project_symptom("generic", "disk full").keywords
    assert "the" not in project_symptom("generic", "the build of the app").keywords


def test_tool_is_part_of_the_identity() -> None:
    text = "connection refused"
    assert project_symptom("npm", text).keywords == project_symptom("pip", text).keywords
    assert project_symptom("npm", text).sym_sha != project_symptom("pip", text).sym_sha


def test_case_insensitive() -> None:
    assert project_symptom("go", "Nil Pointer Dereference").sym_sha == project_symptom("go", "nil pointer dereference").sym_sha


def test_keyword_order_is_irrelevant() -> None:
    assert project_symptom("docker", "manifest unknown image").sym_sha == project_symptom("docker", "image unknown manifest").sym_sha


def test_stemming_joins_word_forms() -> None:
    assert project_symptom("generic", "tests timed out").keywords == project_symptom("generic", "test timing out").keywords


def test_run_noise_is_removed() -> None:
    a = project_symptom("pytest", "2026-01-01T10:00:00Z /tmp/abc123/x.py timed out after 3.2s")
    b = project_symptom("pytest", "2026-02-11T08:30:00Z /tmp/zzz999/x.py timed out after 9.9s")
    assert a.sym_sha == b.sym_sha


def test_description_and_log_signature_project_alike() -> None:
    sig = extract_signature((LOGS / "npm_eresolve.log").read_text(encoding="utf-8"))
    from_log = project_symptom(sig.tool, sig.raw)
    from_user = project_symptom("npm", "npm can't resolve the dependency tree")
    assert from_log.sym_sha == from_user.sym_sha
    assert from_log.keywords == ("depend", "resolv", "tree")


def test_camel_case_exceptions_split() -> None:
    a = project_symptom("python", "ModuleNotFoundError: No module named 'yaml'")
    b = project_symptom("python", "python can't find module yaml")
    assert set(b.keywords) <= set(a.keywords) | {"name"}
    assert "yaml" in a.keywords and "modul" in a.keywords


def test_result_shape_and_bad_input() -> None:
    empty = project_symptom("generic", "")
    assert empty.keywords == () and len(empty.sym_sha) == 64
    assert set(empty.to_dict()) == {"tool", "normalised", "keywords", "sym_sha"}
    assert project_symptom("auto", "x").tool == "generic"
    huge = project_symptom("generic", "disk full " * 1_000_000)
    assert huge.keywords == ("disk", "full")
    with pytest.raises(UnknownToolError):
        project_symptom("nosuchtool", "x")
