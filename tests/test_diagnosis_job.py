"""The ``diagnosis`` job: evidence in the vault (committed when it is git), lessons, context; inline and in a worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.vault.git import GitRepo
from tests.conftest import job_status, wait_for_job
from tests.fixtures.vault.helpers import use_env

CARGO_LOG = """$ cargo build --release
   Compiling shop v0.1.0 (/home/runner/work/shop)
error[E0425]: cannot find value `total` in this scope
  --> src/main.rs:12:5
error: could not compile `shop` due to previous error
The command "cargo build --release" exited with 101.
"""


def _submit(project: str, log: str, tool: str = "auto") -> str:
    from shared.diagnosis.job import submit_diagnosis

    view, created = submit_diagnosis(project=project, tool=tool, log_text=log, submitted_by="test")
    assert created
    return view.id


def _run(job_id: str) -> dict[str, Any]:
    from shared.diagnosis.job import DIAGNOSIS_STEP, run_diagnosis_step
    from shared.jobs.runner import run_step

    run_step(DIAGNOSIS_STEP, job_id, run_diagnosis_step)
    job = job_status(job_id)
    assert job["status"] == "succeeded", job
    return job["result"]


@pytest.fixture
def git_vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: str) -> GitRepo:
    """A local vault working copy with one commit and no remote."""
    root = tmp_path / "vault"
    use_env(monkeypatch, MEM_VAULT_DIR=str(root), MEM_VAULT_REMOTE=None, MEM_FORGEJO_URL=None)
    repo = GitRepo(root)
    repo.init("main")
    (root / "README.md").write_text("# vault\n")
    repo.commit_paths(["README.md"], "seed", author_name="Seeder", author_email="seed@example.test")
    return repo


def test_inline_run_stores_and_commits_evidence_and_finds_the_lesson(git_vault, project_name):  # type: ignore[no-untyped-def]
    from shared.db.engine import session_scope
    from shared.diagnosis import extract_signature
    from shared.diagnosis.lessons import lesson_keys, record_lesson

    with session_scope() as session:
        lesson, _ = record_lesson(session, project=project_name, keys=lesson_keys("auto", log=CARGO_LOG),
                                  title="Undeclared variable", solution="Declare `total` before use.")
    result = _run(_submit(project_name, CARGO_LOG))

    sig = extract_signature(CARGO_LOG, "auto")
    assert result["signature"]["sig_sha"] == sig.sig_sha and result["signature"]["tool"] == "cargo"
    evidence = result["evidence"]
    assert evidence["path"].startswith(f"{project_name}/evidence/") and evidence["path"].endswith(f"-{sig.sig_sha[:12]}.log")
    stored = git_vault.workdir / evidence["path"]
    assert stored.read_bytes() == CARGO_LOG.encode()  # full fidelity
    assert evidence["committed"] and evidence["commit"] == git_vault.head_sha()
    assert git_vault.show(evidence["commit"], evidence["path"]) == CARGO_LOG.encode()
    assert [x["lesson_id"] for x in result["lessons"]] == [lesson.id]
    assert result["context"]["tier"] == 1 and result["context"]["confidence"] == "high"

    # The same log again (a retry, or the same failure re-submitted): same file, no new commit.
    head = git_vault.head_sha()
    again = _run(_submit(project_name, CARGO_LOG))["evidence"]
    assert again["path"] == evidence["path"] and not again["written"] and again["commit"] == head
    assert git_vault.head_sha() == head
    # Another log with the same signature the same day: a numbered sibling, the first evidence kept.
    other = _run(_submit(project_name, "extra line\n" + CARGO_LOG))["evidence"]
    assert other["path"].endswith(f"-{sig.sig_sha[:12]}-2.log") and other["commit"] != head
    assert stored.read_bytes() == CARGO_LOG.encode()


def test_log_without_signature_and_plain_vault(monkeypatch, tmp_path, database, project_name):  # type: ignore[no-untyped-def]
    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "plain"), MEM_VAULT_REMOTE=None)
    result = _run(_submit(project_name, "all tests passed\nbye\n"))
    assert result["signature"]["found"] is False
    assert "-nosig-" in result["evidence"]["path"] and result["evidence"]["committed"] is False
    assert (tmp_path / "plain" / result["evidence"]["path"]).read_text() == "all tests passed\nbye\n"
    ctx = result["context"]
    assert ctx["tier"] is None and ctx["confidence"] == "none" and result["lessons"] == []
    assert [t["name"] for t in ctx["tiers_tried"]] == ["lessons", "project", "reference"]


def test_unknown_tool_in_a_stored_job_fails_it_readably(monkeypatch, tmp_path, database, project_name):  # type: ignore[no-untyped-def]
    from shared.diagnosis.job import DIAGNOSIS_STEP, run_diagnosis_step
    from shared.jobs.runner import run_step

    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "v"))
    job_id = _submit(project_name, CARGO_LOG, tool="frobnicator")
    run_step(DIAGNOSIS_STEP, job_id, run_diagnosis_step)
    job = job_status(job_id)
    assert job["status"] == "failed" and "known tools" in job["error"]


def test_diagnosis_through_a_real_worker(client, admin_headers, git_vault, project_name, start_worker):  # type: ignore[no-untyped-def]
    worker = start_worker(env={"MEM_VAULT_DIR": str(git_vault.workdir)}, queues="diagnosis")
    r = client.post("/memory/diagnose", json={"project": project_name, "log": CARGO_LOG}, headers=admin_headers)
    assert r.status_code == 202, r.get_json()
    job = wait_for_job(r.get_json()["id"], timeout=90, worker=worker)
    assert job["status"] == "succeeded", (job, worker.log_tail())
    assert job["kind"] == "diagnosis" and job["result"]["signature"]["tool"] == "cargo"
    assert (git_vault.workdir / job["result"]["evidence"]["path"]).read_bytes() == CARGO_LOG.encode()
    assert job["result"]["evidence"]["commit"] == git_vault.head_sha()
