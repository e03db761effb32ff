"""``vault generate``: lessons and the skills index written into the vault, committed or proposed, idempotently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.db.engine import session_scope
from shared.db.models import Lesson
from shared.vault.git import GitRepo
from tests.conftest import job_status
from tests.fixtures.vault.helpers import forget_vault, lexical_sources, use_env
from tests.forgejo_standin import TOKEN, StandIn, forgejo_standin, forgejo_swagger  # noqa: F401
from tests.gitserver import GitServer, git_server  # noqa: F401

SKILL = """---
title: Roll back a deployment
description: Return to the previous ReplicaSet | safely
tags: [deploy, k8s]
---
# Roll back

Use `kubectl rollout undo`.
"""


def _add_lesson(project: str, title: str, solution: str, normalised: str = "") -> int:
    with session_scope() as session:
        lesson = Lesson(project=project, tool="pytest", title=title, solution=solution, normalised=normalised,
                        sig_sha="ab" * 32, success_count=2, failure_count=1, source="ci run 42")
        session.add(lesson)
        session.flush()
        return lesson.id


def _generate(project: str) -> dict[str, Any]:
    from shared.ingest.pipeline import run_inline
    from shared.jobs.runner import run_step
    from shared.vault.generate import GENERATE_STEP, run_generate_step, submit_generate

    with session_scope() as session:
        view = submit_generate(session, project, "test")
    due: list[str] = []
    run_step(GENERATE_STEP, view.id, lambda job_id: run_generate_step(job_id, lambda _step, child: due.append(child)))
    for child in due:
        run_inline(child)
    job = job_status(view.id)
    assert job["status"] == "succeeded", job
    return job["result"]


@pytest.fixture
def local_vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, project_name: str, database: str) -> dict[str, Any]:
    """A local vault (no remote, no forge) whose project has a skill, ingested, and one lesson."""
    from shared.ingest.pipeline import ingest_inline

    root = tmp_path / "vault"
    use_env(monkeypatch, MEM_VAULT_DIR=str(root), MEM_VAULT_REMOTE=None, MEM_FORGEJO_URL=None, MEM_EMBEDDER="none",
            MEM_RATE_LIMIT_ENABLED="false")
    (root / project_name / "skills").mkdir(parents=True)
    (root / project_name / "skills" / "rollback.md").write_text(SKILL)
    repo = GitRepo(root)
    repo.init("main")
    repo.commit_paths([project_name], "seed", author_name="Seeder", author_email="seed@example.test")
    ingest_inline(project_name, {"type": "directory", "path": str(root / project_name)})
    lesson = _add_lesson(project_name, "Flaky: port already in use", "Pick a free port with `port=0` (emberfix).",
                         normalised="OSError: [Errno 98] Address already in use\n```nested fence```")
    return {"root": root, "project": project_name, "repo": repo, "lesson": lesson}


def test_generate_commits_lessons_and_the_skills_index_once(local_vault: dict[str, Any]) -> None:
    p, repo, root = local_vault["project"], local_vault["repo"], local_vault["root"]
    result = _generate(p)
    assert result["status"] == "committed", result
    lesson_file = f"lessons/{local_vault['lesson']}-flaky-port-already-in-use.md"
    assert sorted(result["written"]) == [lesson_file, "skills-index.md"]
    assert repo.head_sha() == result["commit"] and repo.last_commit(f"{p}/{lesson_file}").sha == result["commit"]

    text = (root / p / lesson_file).read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["generated_by"] == "poimen-memory" and front["title"] == "Flaky: port already in use"
    assert front["successes"] == 2 and front["tags"] == ["lesson", "pytest"]
    assert "emberfix" in text and "````text" in text, "a fence longer than the backticks inside the symptom"
    index = (root / p / "skills-index.md").read_text()
    assert "| [Roll back a deployment](skills/rollback.md) | Return to the previous ReplicaSet \\| safely |" in index
    assert lexical_sources(p, "emberfix") == {lesson_file}, "generated documents are searchable at once"

    again = _generate(p)
    assert again["status"] == "unchanged" and again["written"] == []
    assert repo.head_sha() == result["commit"], "regenerating without changes makes no commit"

    newer = _add_lesson(p, "Timeout in the db fixture", "Raise the pool size.")
    third = _generate(p)
    assert third["status"] == "committed" and third["written"] == [f"lessons/{newer}-timeout-in-the-db-fixture.md"]


def test_hand_written_files_are_never_overwritten(local_vault: dict[str, Any]) -> None:
    p, root = local_vault["project"], local_vault["root"]
    (root / p / "skills-index.md").write_text("# Our own index\n\nCurated by hand.\n")
    result = _generate(p)
    assert {"path": "skills-index.md", "reason": "a document not written by the generator is already there"} in result["skipped"]
    assert (root / p / "skills-index.md").read_text() == "# Our own index\n\nCurated by hand.\n"
    assert [w for w in result["written"] if w.startswith("lessons/")]


def test_nothing_to_generate_for_a_project_without_lessons_or_skills(monkeypatch, tmp_path, project_name, database) -> None:
    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_VAULT_REMOTE=None, MEM_FORGEJO_URL=None)
    result = _generate(project_name)
    assert result["status"] == "nothing to generate" and result["documents"] == 0
    assert not (tmp_path / "vault").exists()


def test_generate_pushes_when_the_vault_has_a_remote(monkeypatch, tmp_path, project_name, database,
                                                     git_server: GitServer) -> None:  # noqa: F811
    from shared.vault.sync import sync_inline

    url = git_server.create_repo("vault", files={f"{project_name}/notes/a.md": "# A\n"})
    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_VAULT_REMOTE=url, MEM_FORGEJO_URL=None,
            MEM_EMBEDDER="none")
    try:
        assert job_status(sync_inline("test"))["status"] == "succeeded"
        _add_lesson(project_name, "Pushed lesson", "The remote gets it.")
        result = _generate(project_name)
        assert result["status"] == "committed"
        assert git_server.branch_sha("vault") == result["commit"], "the commit reached the remote"
        sync = job_status(sync_inline("test"))["result"]
        assert [r for r in sync["projects"] if r["project"] == project_name][0]["mode"] == "changes"
    finally:
        forget_vault(project_name)


def test_with_a_forge_generate_proposes_a_pull_request_once(monkeypatch, tmp_path, project_name, database,
                                                            forgejo_standin: StandIn) -> None:  # noqa: F811
    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_VAULT_REMOTE=None,
            MEM_FORGEJO_URL=forgejo_standin.base_url, MEM_FORGEJO_TOKEN=TOKEN, MEM_FORGEJO_REPO="team/vault")
    lesson = _add_lesson(project_name, "Proposed lesson", "Open a PR for it.")
    forgejo_standin.seed({f"{project_name}/README.md": b"# Project\n"})
    result = _generate(project_name)
    assert result["status"] == "proposed" and result["branch"].startswith(f"generate/{project_name}-")
    path = f"{project_name}/lessons/{lesson}-proposed-lesson.md"
    assert b"Open a PR for it." in forgejo_standin.repo.resolve(result["branch"]).tree[path]
    assert forgejo_standin.repo.pulls[result["pr_number"]]["head"]["ref"] == result["branch"]
    assert path not in forgejo_standin.repo.resolve("main").tree

    again = _generate(project_name)
    assert again["status"] == "already proposed" and again["pr_number"] == result["pr_number"]
    assert len(forgejo_standin.repo.pulls) == 1, "the same content is not proposed twice"

    forgejo_standin.merge_pull(result["pr_number"])
    assert _generate(project_name)["status"] == "unchanged"


def test_generate_endpoint(local_vault: dict[str, Any], client, admin_headers, make_key) -> None:
    from shared.ingest.pipeline import run_inline
    from shared.vault.generate import run_generate_step

    p = local_vault["project"]
    assert client.post("/memory/vault/generate", json={"project": "no-such-project"}, headers=admin_headers).status_code == 404
    assert client.post("/memory/vault/generate", json={"project": "../x"}, headers=admin_headers).status_code == 400
    reader = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=[p])}"}
    assert client.post("/memory/vault/generate", json={"project": p}, headers=reader).status_code == 403
    answer = client.post("/memory/vault/generate", json={"project": p}, headers=admin_headers)
    assert answer.status_code == 202, answer.get_json()
    job = answer.get_json()
    assert job["kind"] == "vault" and job["project"] == p and answer.headers["Location"].endswith(f"/memory/jobs/{job['id']}")
    # No worker runs in this test: finish the job (and the ingest it starts) here.
    due: list[str] = []
    run_generate_step(job["id"], lambda _step, child: due.append(child))
    for child in due:
        run_inline(child)
    assert job_status(job["id"])["status"] == "succeeded"
    assert job_status(job["id"])["result"]["status"] == "committed"
