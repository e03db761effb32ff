"""resolve_vault_path: hostile paths are refused with a reason, honest ones map under root/project."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.vault.paths import UnsafePath, relative_posix, resolve_vault_path, validate_project_name

# (user_path, a word the refusal reason must contain). Each is an attempt to leave the project
# folder, reach .git or a dotfile, or smuggle a separator past a later decoding step.
HOSTILE: list[tuple[str, str]] = [
    ("../secret.md", ".."),
    ("runbooks/../../other/x.md", ".."),
    ("..", ".."),
    ("./deploy.md", "'.'"),
    ("/etc/passwd", "absolute"),
    ("//server/share/x.md", "absolute"),
    ("C:/Windows/win.ini", "drive letter"),
    ("c:evil.md", "drive letter"),
    ("runbooks\\..\\..\\x.md", "'\\'"),
    ("..\\x.md", "'\\'"),
    ("deploy.md:stream", "':'"),
    ("deploy\x00.md", "NUL"),
    ("deploy\n.md", "control"),
    ("deploy\x1b[31m.md", "control"),
    (".git/config", ".git"),
    ("runbooks/.git/hooks/pre-commit", ".git"),
    (".GIT/config", ".git"),
    (".env", "hidden"),
    ("runbooks/.hidden/x.md", "hidden"),
    ("%2e%2e/secret.md", ".."),
    ("%2E%2E%2Fsecret.md", ".."),
    ("..%2fsecret.md", ".."),
    ("%252e%252e/secret.md", ".."),
    ("%25252e%25252e%25252fsecret.md", ".."),
    ("%252525252e%252525252e/x.md", "layers"),
    ("runbooks%5c..%5cx.md", "'\\'"),
    ("%2egit/config", ".git"),
    ("%c0%ae%c0%ae/secret.md", "UTF-8"),
    ("%c0%af", "UTF-8"),
    ("%e0%80%ae%e0%80%ae/x.md", "UTF-8"),
    ("deploy%00.md", "NUL"),
    ("deploy%2emd", "percent"),
    ("\uff0e\uff0e/secret.md", "look-alike"),  # fullwidth full stops
    ("..\uff0fsecret.md", "look-alike"),  # fullwidth solidus
    ("\uff3c..\uff3cx.md", "look-alike"),  # fullwidth reverse solidus
    ("\u2024\u2024/secret.md", "look-alike"),  # one-dot leader
    ("\u2025/secret.md", "look-alike"),  # two-dot leader
    ("..\u2215secret.md", "look-alike"),  # division slash
    ("..\u2044secret.md", "look-alike"),  # fraction slash
    ("\ufe52\ufe52/x.md", "look-alike"),  # small full stop
    ("\ufe68x.md", "look-alike"),  # small reverse solidus
    ("%ef%bc%8e%ef%bc%8e/x.md", "look-alike"),  # fullwidth dots, percent-encoded
    ("deploy\u202e.md", "invisible"),  # right-to-left override
    ("dep\u200bloy.md", "invisible"),  # zero-width space
    ("deploy\udcc0.md", "invisible"),  # lone surrogate (undecodable byte)
    ("runbooks//deploy.md", "empty segment"),
    ("runbooks/", "empty segment"),
    ("deploy.md.", "end with"),
    ("deploy.md ", "end with"),
    ("a/" * 40 + "x.md", "deeper"),
    ("x" * 300 + ".md", "longer"),
    ("", "empty"),
]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "ops" / "runbooks").mkdir(parents=True)
    (root / "ops" / "runbooks" / "deploy.md").write_text("# Deploy\n")
    (root / "web").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("secret\n")
    return root


def test_the_hostile_table_is_large_enough() -> None:
    assert len(HOSTILE) >= 30


@pytest.mark.parametrize(("user_path", "reason"), HOSTILE, ids=[repr(p)[:40] for p, _ in HOSTILE])
def test_hostile_paths_are_refused_with_a_reason(vault: Path, user_path: str, reason: str) -> None:
    with pytest.raises(UnsafePath) as refused:
        resolve_vault_path(vault, "ops", user_path)
    message = str(refused.value)
    assert reason.lower() in message.lower(), message
    assert len(message) < 200


@pytest.mark.parametrize(
    "user_path",
    ["runbooks/deploy.md", "runbooks/new file.md", "skills/triage-v2.md", "notes/caf\u00e9.md", "a.b/c_d.md", "x.md"],
)
def test_honest_paths_map_under_the_project(vault: Path, user_path: str) -> None:
    resolved = resolve_vault_path(vault, "ops", user_path)
    assert resolved == vault.resolve() / "ops" / user_path
    assert relative_posix(vault, resolved) == f"ops/{user_path}"


@pytest.mark.parametrize(
    "name", ["", ".", "..", ".git", "-rf", "a/b", "a\\b", "a b", "x.", "Ops", "KubeTeam", "caf\u00e9", "%2e%2e", "a" * 101, "a\x00"]
)
def test_bad_project_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafePath):
        validate_project_name(name)


@pytest.mark.parametrize("name", ["ops", "web-2", "team.alpha", "a_b", "9lives", "x" * 100])
def test_good_project_names_are_accepted(name: str) -> None:
    assert validate_project_name(name) == name


def test_project_name_must_be_a_string_and_is_checked_by_resolve(vault: Path) -> None:
    with pytest.raises(UnsafePath, match="string"):
        validate_project_name(None)
    with pytest.raises(UnsafePath, match="project name"):
        resolve_vault_path(vault, "..", "x.md")
    with pytest.raises(UnsafePath, match="string"):
        resolve_vault_path(vault, "ops", b"x.md")  # type: ignore[arg-type]


def test_symlink_out_of_the_vault_is_refused(vault: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside", vault / "ops" / "escape")
    os.symlink(tmp_path / "outside" / "secret.md", vault / "ops" / "secret.md")
    with pytest.raises(UnsafePath, match="outside the project"):
        resolve_vault_path(vault, "ops", "escape/secret.md")
    with pytest.raises(UnsafePath, match="outside the project"):
        resolve_vault_path(vault, "ops", "secret.md")


def test_symlink_into_another_project_is_refused(vault: Path) -> None:
    (vault / "web" / "page.md").write_text("# Web\n")
    os.symlink(vault / "web" / "page.md", vault / "ops" / "page.md")
    with pytest.raises(UnsafePath, match="outside the project"):
        resolve_vault_path(vault, "ops", "page.md")


def test_symlinked_project_folder_is_refused(vault: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside", vault / "evil")
    os.symlink(vault / "web", vault / "alias")
    with pytest.raises(UnsafePath, match="symlink"):
        resolve_vault_path(vault, "evil", "secret.md")
    with pytest.raises(UnsafePath, match="symlink"):
        resolve_vault_path(vault, "alias", "page.md")


def test_symlink_inside_the_project_is_allowed(vault: Path) -> None:
    os.symlink(vault / "ops" / "runbooks" / "deploy.md", vault / "ops" / "latest.md")
    assert resolve_vault_path(vault, "ops", "latest.md") == vault.resolve() / "ops" / "latest.md"


def test_vault_root_behind_a_symlink_works(vault: Path, tmp_path: Path) -> None:
    link = tmp_path / "vault-link"
    os.symlink(vault, link)
    resolved = resolve_vault_path(link, "ops", "runbooks/deploy.md")
    assert resolved == vault.resolve() / "ops" / "runbooks" / "deploy.md"
    assert relative_posix(link, resolved) == "ops/runbooks/deploy.md"
    assert relative_posix(link, link / "ops" / "x.md") == "ops/x.md"


def test_relative_posix_refuses_paths_outside(vault: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsafePath, match="outside"):
        relative_posix(vault, tmp_path / "outside" / "secret.md")
    with pytest.raises(UnsafePath, match="outside"):
        relative_posix(vault, vault / ".." / "outside" / "secret.md")
    assert relative_posix(vault, Path("ops/a.md")) == "ops/a.md"


def test_huge_input_is_refused_quickly_without_decoding_it(vault: Path) -> None:
    with pytest.raises(UnsafePath, match="longer than"):
        resolve_vault_path(vault, "ops", "%25" * 5_000_000)


# Fragments that build traversal attempts; hypothesis glues them together in any order.
_FRAGMENTS = [*"./\\%2eEfFcC05a:\x00\uff0e\uff0f\u2024", "%2e", "%2f", "%25", "%c0%ae", "..", "/.."]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=20).map("".join))
def test_nothing_generated_escapes_the_project(tmp_path_factory: pytest.TempPathFactory, user_path: str) -> None:
    root = tmp_path_factory.getbasetemp() / "fuzz-vault"
    (root / "ops").mkdir(parents=True, exist_ok=True)
    try:
        resolved = resolve_vault_path(root, "ops", user_path)
    except UnsafePath:
        return
    project = (root / "ops").resolve()
    assert resolved.resolve().is_relative_to(project)
    assert resolved != project
    assert ".." not in resolved.parts
    assert not re.search("%[0-9a-fA-F]{2}", str(resolved.relative_to(project)))  # no escape survives
