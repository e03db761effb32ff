"""Browse and read the vault over HTTP: listings with git metadata, sections, highlight, ETag, hostile paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import select

from shared.db.engine import session_scope
from shared.db.models import ChunkRow, Project
from shared.vault.git import GitRepo
from tests.fixtures.vault.helpers import use_env

SECRET = "TOPSECRET-outside-the-vault"

DEPLOY = """---
title: Deploying the web tier
tags: [deploy]
---
# Deploy

Lead text of the deploy runbook.

## Steps

Run the canary first.

## Rollback

Undo with `kubectl rollout undo`.

## Steps

The second steps section gets the anchor steps-1.
"""

PLAIN = "# Plain notes\n\nNothing fancy here.\n"


def _write(root: Path, rel: str, data: bytes | str) -> None:
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    target.write_bytes(data)


@pytest.fixture
def vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project_name: str) -> dict[str, Any]:
    """A git vault with two projects; a secret next to it (outside) and a symlink pointing at it."""
    root = tmp_path / "vault"
    other = f"{project_name}-other"
    use_env(monkeypatch, MEM_VAULT_DIR=str(root), MEM_MAX_DOCUMENT_BYTES="20000", MEM_RATE_LIMIT_ENABLED="false",
            MEM_EMBEDDER="none")
    files: dict[str, bytes | str] = {
        f"{project_name}/runbooks/deploy.md": DEPLOY,
        f"{project_name}/notes/plain.md": PLAIN,
        f"{project_name}/notes/deep/inner.md": "# Inner\n",
        f"{project_name}/top.md": "no heading at all\n",
        f"{project_name}/binary.md": b"# Looks like markdown\x00\x01\x02",
        f"{project_name}/latin1.md": "# Caf\u00e9\n".encode("latin-1"),
        f"{project_name}/huge.md": "# Huge\n\n" + "word " * 6000,
        f"{project_name}/images/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        f"{project_name}/.hidden.md": "# Hidden\n",
        f"{other}/secret-project.md": "# Other project\n",
    }
    for rel, data in files.items():
        _write(root, rel, data)
    repo = GitRepo(root)
    repo.init("main")
    repo.commit_paths(sorted(files), "Seed the vault", author_name="Ada Author", author_email="ada@example.test")
    (tmp_path / "secret.md").write_text(SECRET)
    os.symlink(tmp_path / "secret.md", root / project_name / "escape.md")
    return {"root": root, "project": project_name, "other": other, "head": repo.head_sha()}


def test_projects_list_counts_files_and_dates_from_git(vault, client, admin_headers, make_key) -> None:
    answer = client.get("/memory/vault", headers=admin_headers)
    assert answer.status_code == 200, answer.get_json()
    projects = {p["name"]: p for p in answer.get_json()["projects"]}
    mine = projects[vault["project"]]
    # deploy, plain, inner, top, binary, latin1, huge, logo and the escape symlink; not .hidden.md
    assert mine["file_count"] == 9
    assert mine["path"] == vault["project"]
    assert mine["last_commit"]["sha"] == vault["head"] and mine["last_commit"]["author"] == "Ada Author"
    assert mine["updated_at"] == mine["last_commit"]["date"]

    scoped = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[vault['project']])}"}
    names = [p["name"] for p in client.get("/memory/vault", headers=scoped).get_json()["projects"]]
    assert names == [vault["project"]]


def test_directory_listing_one_level_with_titles_and_commits(vault, client, admin_headers) -> None:
    top = client.get(f"/memory/vault/{vault['project']}", headers=admin_headers).get_json()
    assert [d["name"] for d in top["directories"]] == ["images", "notes", "runbooks"]
    notes = next(d for d in top["directories"] if d["name"] == "notes")
    assert notes["file_count"] == 2 and notes["path"] == "notes"
    files = {f["name"]: f for f in top["files"]}
    assert ".hidden.md" not in files and "escape.md" not in files, "dotfiles and links out of the vault are hidden"
    assert files["top.md"]["title"] == "top" and files["top.md"]["size"] == len("no heading at all\n")
    assert files["top.md"]["last_commit"]["sha"] == vault["head"]

    runbooks = client.get(f"/memory/vault/{vault['project']}?path=runbooks", headers=admin_headers).get_json()
    assert runbooks["path"] == "runbooks" and runbooks["directories"] == []
    (deploy,) = runbooks["files"]
    assert deploy["title"] == "Deploying the web tier" and deploy["path"] == "runbooks/deploy.md"
    plain = client.get(f"/memory/vault/{vault['project']}?path=notes", headers=admin_headers).get_json()["files"]
    assert [f["title"] for f in plain] == ["Plain notes"]

    assert client.get(f"/memory/vault/{vault['project']}?path=nope", headers=admin_headers).status_code == 404
    assert client.get(f"/memory/vault/{vault['project']}?path=runbooks/deploy.md", headers=admin_headers).status_code == 404


def test_file_read_has_sections_with_github_anchors_and_an_etag(vault, client, admin_headers) -> None:
    url = f"/memory/vault/{vault['project']}/runbooks/deploy.md"
    answer = client.get(url, headers=admin_headers)
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["content"] == DEPLOY and body["size"] == len(DEPLOY.encode())
    assert body["title"] == "Deploying the web tier"
    assert body["last_commit"]["sha"] == vault["head"] and body["highlight"] is None
    assert [(s["title"], s["level"], s["anchor"]) for s in body["sections"]] == [
        ("Deploy", 1, "deploy"), ("Steps", 2, "steps"), ("Rollback", 2, "rollback"), ("Steps", 2, "steps-1"),
    ]
    lines = DEPLOY.split("\n")
    for section in body["sections"]:
        assert lines[section["start_line"] - 1].lstrip("# ") == section["title"]
        assert section["content"].split("\n")[-1] == lines[section["end_line"] - 1]

    etag = answer.headers["ETag"]
    assert answer.headers["Cache-Control"] == "private, no-cache"
    again = client.get(url, headers={**admin_headers, "If-None-Match": etag})
    assert again.status_code == 304 and again.data == b"" and again.headers["ETag"] == etag

    (vault["root"] / vault["project"] / "runbooks" / "deploy.md").write_text(DEPLOY + "\n## New\n\nMore.\n")
    changed = client.get(url, headers={**admin_headers, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert changed.get_json()["sections"][-1]["anchor"] == "new"


def test_highlight_marks_the_section_a_chunk_came_from(vault, client, admin_headers, make_key) -> None:
    from shared.ingest.pipeline import ingest_inline

    project = vault["project"]
    ingest_inline(project, {"type": "directory", "path": str(vault["root"] / project)})
    with session_scope() as session:
        chunks = {
            (c.source, c.anchor): c.id
            for c in session.scalars(select(ChunkRow).join(Project).where(Project.name == project))
        }
    url = f"/memory/vault/{project}/runbooks/deploy.md"
    chunk = chunks[("runbooks/deploy.md", "steps-1")]
    body = client.get(f"{url}?highlight={chunk}", headers=admin_headers).get_json()
    highlight = body["highlight"]
    assert highlight["anchor"] == "steps-1" and highlight["section_index"] == 3 and highlight["stale"] is False
    assert [s["highlighted"] for s in body["sections"]] == [False, False, False, True]
    assert [s["anchor"] for s in highlight["sections"]] == ["rollback", "steps-1"], "the section and its neighbours"

    middle = client.get(f"{url}?highlight={chunks[('runbooks/deploy.md', 'rollback')]}", headers=admin_headers)
    assert [s["anchor"] for s in middle.get_json()["highlight"]["sections"]] == ["steps", "rollback", "steps-1"]

    etag = client.get(url, headers=admin_headers).headers["ETag"]
    assert client.get(f"{url}?highlight={chunk}", headers={**admin_headers, "If-None-Match": etag}).status_code == 200

    other_doc = chunks[("notes/plain.md", "plain-notes")]
    assert client.get(f"{url}?highlight={other_doc}", headers=admin_headers).status_code == 404
    assert client.get(f"{url}?highlight=not-a-chunk", headers=admin_headers).status_code == 400
    assert client.get(f"{url}?highlight={'0' * 32}", headers=admin_headers).status_code == 404
    outsider = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[vault['other']])}"}
    assert client.get(f"{url}?highlight={chunk}", headers=outsider).status_code == 403

    (vault["root"] / project / "runbooks" / "deploy.md").write_text("# Deploy\n\nRewritten.\n")
    assert client.get(f"{url}?highlight={chunk}", headers=admin_headers).get_json()["highlight"]["stale"] is True


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("binary.md", 415, "binary"),
        ("latin1.md", 415, "UTF-8"),
        ("huge.md", 413, "limit"),
        ("missing.md", 404, "no file"),
        ("notes", 404, "no file"),
        (".hidden.md", 400, "hidden"),
        ("escape.md", 400, "outside"),
    ],
)
def test_files_that_cannot_be_served_get_clear_errors(vault, client, admin_headers, path, status, reason) -> None:
    answer = client.get(f"/memory/vault/{vault['project']}/{path}", headers=admin_headers)
    assert answer.status_code == status, answer.get_json()
    assert answer.mimetype == "application/problem+json"
    assert reason.lower() in answer.get_json()["detail"].lower()


def test_non_markdown_text_is_served_without_sections(vault, client, admin_headers) -> None:
    _write(vault["root"], f"{vault['project']}/notes/todo.txt", "# not parsed\n")
    body = client.get(f"/memory/vault/{vault['project']}/notes/todo.txt", headers=admin_headers).get_json()
    assert body["sections"] == [] and body["title"] == "todo.txt" and body["last_commit"] is None


def test_unknown_and_hidden_projects(vault, client, admin_headers, make_key) -> None:
    assert client.get("/memory/vault/no-such-project", headers=admin_headers).status_code == 404
    assert client.get("/memory/vault/no-such-project/a.md", headers=admin_headers).status_code == 404
    scoped = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[vault['project']])}"}
    hidden = client.get(f"/memory/vault/{vault['other']}/secret-project.md", headers=scoped)
    missing = client.get("/memory/vault/no-such-project/a.md", headers=scoped)
    assert hidden.status_code == missing.status_code == 403
    assert hidden.get_json()["detail"].replace(vault["other"], "X") == missing.get_json()["detail"].replace(
        "no-such-project", "X"
    ), "a hidden project and a missing one get the same answer"
    assert client.get("/memory/vault", headers={}).status_code == 401


# Each entry is appended to /memory/vault/<project>/ as it would appear on the wire. None may escape.
TRAVERSAL: list[str] = [
    "../secret.md",
    "..%2fsecret.md",
    "%2e%2e/secret.md",
    "%2e%2e%2fsecret.md",
    "%2E%2E%2Fsecret.md",
    "%252e%252e%252fsecret.md",
    "%25252e%25252e%25252fsecret.md",
    "..%5csecret.md",
    "%2e%2e%5csecret.md",
    "runbooks/..%2f..%2fsecret.md",
    "runbooks/%2e%2e/%2e%2e/secret.md",
    "%c0%ae%c0%ae/secret.md",
    "%c0%ae%c0%ae%c0%afsecret.md",
    "%e0%80%ae%e0%80%ae/secret.md",
    "%ef%bc%8e%ef%bc%8e/secret.md",
    "%ef%bc%8e%ef%bc%8e%ef%bc%8fsecret.md",
    "%e2%80%a4%e2%80%a4/secret.md",
    "..%e2%88%95secret.md",
    "..%e2%81%84secret.md",
    "%ef%b9%92%ef%b9%92/secret.md",
    "..%ef%bc%bcsecret.md",
    "/etc/passwd",
    "%2fetc%2fpasswd",
    "C:%5cWindows%5cwin.ini",
    "c:secret.md",
    ".git/config",
    "%2egit/config",
    ".GIT/config",
    "%2e%67%69%74/config",
    "runbooks/.git/config",
    "deploy.md%00.png",
    "%00",
    "runbooks%2fdeploy.md%3a%3a%24DATA",
    "escape.md",
    "runbooks/./deploy.md",
    "..;/secret.md",
    "%2e%2e;/secret.md",
    "runbooks/deploy.md%20",
    "dep%e2%80%8bloy.md",
    "deploy%e2%80%ae.md",
]


# werkzeug merges the '//' these produce into '/' (a redirect that stays inside the project): a 404 follows.
MERGED_SLASHES = {"/etc/passwd", "%2fetc%2fpasswd"}


def test_the_traversal_table_is_large_enough() -> None:
    assert len(TRAVERSAL) >= 30


@pytest.mark.parametrize("attempt", TRAVERSAL)
def test_traversal_attempts_never_escape(vault, client, admin_headers, attempt: str) -> None:
    project = vault["project"]
    answers = [
        client.get(f"/memory/vault/{project}/{attempt}", headers=admin_headers),
        client.get(f"/memory/vault/{project}?path={quote(attempt, safe='%')}", headers=admin_headers),
        client.get(f"/memory/vault/{attempt}", headers=admin_headers),
    ]
    if attempt not in MERGED_SLASHES:
        assert answers[0].status_code == 400, (attempt, answers[0].get_json())
        assert answers[0].get_json()["detail"].startswith("path refused")
    for answer in answers:
        if answer.status_code == 308:
            # werkzeug merges '//' into '/' by redirecting; the target must stay inside the vault API
            target = answer.headers["Location"].removeprefix("http://localhost")
            assert target.startswith("/memory/vault/"), target
            answer = client.get(target, headers=admin_headers)
        assert answer.status_code in (400, 403, 404, 405), (attempt, answer.status_code, answer.data[:200])
        assert SECRET.encode() not in answer.data and b"[core]" not in answer.data and b"root:" not in answer.data
        assert answer.mimetype == "application/problem+json"


def test_project_names_are_checked_like_paths(vault, client, admin_headers) -> None:
    for name in ("%2e%2e", "..", ".git", "%2egit", "a%2fb", "%00"):
        answer = client.get(f"/memory/vault/{name}/x.md", headers=admin_headers)
        assert answer.status_code in (400, 404), (name, answer.status_code)


def test_highlight_prefers_the_chunk_anchor_over_its_first_line() -> None:
    """A heading with no body folds into the next section's chunk: that chunk starts in the section above."""
    from shared.vault.browse import ChunkLocation, apply_highlight
    from shared.vault.markdown import parse_sections

    text = "# Top\n\n## Child\n\nBody of the child.\n\n## Sibling\n\nMore.\n"
    file = {"content_sha": "x", "sections": [{**vars(s), "highlighted": False} for s in parse_sections(text)]}
    folded = ChunkLocation("c" * 32, "p", "a.md", start_line=1, end_line=5, anchor="child", content_sha="x")
    assert apply_highlight(file, folded)["highlight"]["anchor"] == "child"
    whole = ChunkLocation("d" * 32, "p", "a.md", start_line=7, end_line=9, anchor="", content_sha="y")
    highlight = apply_highlight(file, whole)["highlight"]
    assert highlight["anchor"] == "sibling" and highlight["stale"] is True
