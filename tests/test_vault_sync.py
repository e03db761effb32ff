"""Vault sync against a real git remote over HTTP, run in-process (the worker flow is in test_webhook_sync_e2e)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from shared.db.engine import session_scope
from shared.db.models import Job
from shared.jobs import store
from tests.conftest import job_status
from tests.fixtures.vault.helpers import (
    chunk_sources,
    document_paths,
    forget_vault,
    indexed_commit,
    lexical_sources,
    published_events,
    use_env,
)
from tests.gitserver import GitServer, git_server  # noqa: F401

MAX_BYTES = 20_000


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, git_server: GitServer, project_name: str,  # noqa: F811
           database: str) -> Iterator[dict[str, Any]]:
    """A remote vault with one project, a working copy location, and the environment pointing at both."""
    p = project_name
    url = git_server.create_repo("vault", files={
        f"{p}/runbooks/deploy.md": "# Deploy\n\nUse the zebracanary rollout.\n",
        f"{p}/runbooks/old-name.md": "# Renamed later\n\nThe quokkaprocedure lives here.\n",
        f"{p}/notes/doomed.md": "# Doomed\n\nThe walrusnote will be deleted.\n",
        f"{p}/notes/turns-binary.md": "# Text for now\n\nThe narwhaltext becomes binary.\n",
        "README.md": "# The vault\n",
    })
    use_env(monkeypatch, MEM_VAULT_REMOTE=url, MEM_VAULT_DIR=str(tmp_path / "vault"),
            MEM_MAX_DOCUMENT_BYTES=str(MAX_BYTES), MEM_EMBEDDER="none", MEM_WEBHOOK_SECRET=None)
    editor = git_server.editor("vault")
    yield {"project": p, "url": url, "editor": editor, "server": git_server, "vault": tmp_path / "vault"}
    forget_vault(p)


def _sync() -> dict[str, Any]:
    from shared.vault.sync import sync_inline

    job = job_status(sync_inline("test"))
    assert job["status"] == "succeeded", job
    return job


def test_first_sync_clones_and_indexes_every_project(synced: dict[str, Any]) -> None:
    p = synced["project"]
    job = _sync()
    head = synced["server"].branch_sha("vault")
    result = job["result"]
    assert result["new_commit"] == head and result["old_commit"] is None and result["forced"] is False
    (plan,) = [r for r in result["projects"] if r["project"] == p]
    assert plan["mode"] == "reconcile" and plan["status"] in ("queued", "running", "succeeded")
    assert {"path": "README.md", "reason": "not inside a project folder"} not in result["skipped"], \
        "a first sync reconciles folders; files at the top are simply not part of any project"
    assert document_paths(p) == {"runbooks/deploy.md", "runbooks/old-name.md", "notes/doomed.md", "notes/turns-binary.md"}
    assert lexical_sources(p, "zebracanary") == {"runbooks/deploy.md"}
    assert indexed_commit(p) == head
    assert published_events(p)[-1]["commit"] == head
    assert (synced["vault"] / p / "runbooks" / "deploy.md").is_file()

    again = _sync()["result"]
    assert [r for r in again["projects"] if r["project"] == p] == [], "nothing changed: no work for the project"


def test_a_folder_the_api_could_not_name_is_skipped_not_indexed(synced: dict[str, Any]) -> None:
    # Project names follow one rule everywhere: a folder the API would refuse as a project must not
    # become a project that no request can name.
    editor = synced["editor"]
    _sync()
    editor.write("Payments/runbooks/refund.md", "# Refund\n\nThe tapirrefund step.\n")
    editor.commit_and_push("an upper-case folder")

    result = _sync()["result"]
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert "Payments/" in reasons and "a-z" in reasons["Payments/"], reasons
    assert all(r["project"] != "Payments" for r in result["projects"])
    assert document_paths("Payments") == set()


def test_add_edit_rename_delete_reindex_exactly_those(synced: dict[str, Any]) -> None:
    p, editor = synced["project"], synced["editor"]
    _sync()
    editor.write(f"{p}/runbooks/new.md", "# New\n\nThe axolotlstep is new.\n")
    editor.write(f"{p}/runbooks/deploy.md", "# Deploy\n\nUse the capybararollout now.\n")
    editor.rename(f"{p}/runbooks/old-name.md", f"{p}/procedures/renamed.md")
    editor.delete(f"{p}/notes/doomed.md")
    editor.write("README.md", "# The vault, edited\n")
    head = editor.commit_and_push("add, edit, rename, delete")

    result = _sync()["result"]
    (plan,) = [r for r in result["projects"] if r["project"] == p]
    assert plan["mode"] == "changes" and plan["changed"] == 3 and plan["deleted"] == 2
    child = job_status(plan["job_id"])
    assert child["status"] == "succeeded", child
    assert sorted(child["result"]["changed"]) == ["procedures/renamed.md", "runbooks/deploy.md", "runbooks/new.md"]
    assert sorted(child["result"]["removed"]) == ["notes/doomed.md", "runbooks/old-name.md"]
    assert {"path": "README.md", "reason": "not inside a project folder"} in result["skipped"]

    assert lexical_sources(p, "axolotlstep") == {"runbooks/new.md"}
    assert lexical_sources(p, "capybararollout") == {"runbooks/deploy.md"}
    assert lexical_sources(p, "zebracanary") == set()
    assert lexical_sources(p, "quokkaprocedure") == {"procedures/renamed.md"}
    assert lexical_sources(p, "walrusnote") == set()
    assert "notes/doomed.md" not in chunk_sources(p) and "runbooks/old-name.md" not in chunk_sources(p)
    assert indexed_commit(p) == head
    event = published_events(p)[-1]
    assert event["commit"] == head and sorted(event["removed"]) == ["notes/doomed.md", "runbooks/old-name.md"]


def test_binary_non_utf8_and_huge_files_are_skipped_with_reasons(synced: dict[str, Any]) -> None:
    p, editor = synced["project"], synced["editor"]
    _sync()
    assert "notes/turns-binary.md" in chunk_sources(p)
    work = editor.workdir / p
    (work / "notes" / "turns-binary.md").write_bytes(b"# Now binary\x00\x01\x02narwhaltext")
    (work / "notes" / "latin1.md").write_bytes("# Caf\u00e9 emuword\n".encode("latin-1"))
    (work / "notes" / "huge.md").write_text("# Huge\n\n" + "hugeword " * (MAX_BYTES // 5))
    (work / "images").mkdir()
    (work / "images" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    editor.write(f"{p}/notes/fine.md", "# Fine\n\nThe okapiword is indexed.\n")
    head = editor.commit_and_push("awkward files")

    result = _sync()["result"]
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert "binary" in reasons[f"{p}/notes/turns-binary.md"]
    assert "UTF-8" in reasons[f"{p}/notes/latin1.md"]
    assert "limit" in reasons[f"{p}/notes/huge.md"]
    assert "not a markdown file" in reasons[f"{p}/images/diagram.png"]
    assert lexical_sources(p, "okapiword") == {"notes/fine.md"}
    # The file that became binary no longer has text in the vault: its old text is not searchable either.
    assert lexical_sources(p, "narwhaltext") == set() and "notes/turns-binary.md" not in chunk_sources(p)
    assert indexed_commit(p) == head


def test_force_push_resets_and_reconciles(synced: dict[str, Any]) -> None:
    p, editor = synced["project"], synced["editor"]
    _sync()
    editor.write(f"{p}/notes/short-lived.md", "# Short\n\nThe pangolinword will be force-pushed away.\n")
    editor.commit_and_push("soon rewritten")
    _sync()
    assert lexical_sources(p, "pangolinword") == {"notes/short-lived.md"}

    editor.reset_hard("HEAD~1")
    editor.write(f"{p}/notes/replacement.md", "# Replacement\n\nThe tapirword replaces it.\n")
    editor.commit("rewritten history")
    editor.push(force=True)
    head = editor.head()

    result = _sync()["result"]
    assert result["forced"] is True and result["new_commit"] == head
    (plan,) = [r for r in result["projects"] if r["project"] == p]
    assert plan["mode"] == "reconcile"
    assert lexical_sources(p, "pangolinword") == set() and "notes/short-lived.md" not in document_paths(p)
    assert lexical_sources(p, "tapirword") == {"notes/replacement.md"}
    assert indexed_commit(p) == head


def test_a_project_that_lags_is_repaired_by_the_next_sync(synced: dict[str, Any]) -> None:
    """A sync that moved the working copy but never finished indexing must not leave the index behind."""
    from shared.db.models import Project

    p, editor = synced["project"], synced["editor"]
    first = _sync()["result"]["new_commit"]
    editor.write(f"{p}/notes/late.md", "# Late\n\nThe dugongword arrives late.\n")
    head = editor.commit_and_push("late")
    from shared.config import get_settings
    from shared.vault.sync import update_working_copy, vault_repo

    settings = get_settings()
    update_working_copy(vault_repo(settings), settings)  # the working copy moves, the index does not
    with session_scope() as session:
        assert session.scalar(select(Project.indexed_commit).where(Project.name == p)) == first

    result = _sync()["result"]
    assert result["old_commit"] == result["new_commit"] == head, "git sees nothing new..."
    (plan,) = [r for r in result["projects"] if r["project"] == p]
    assert plan["mode"] == "changes" and plan["changed"] == 1, "...but the project's own commit does"
    assert lexical_sources(p, "dugongword") == {"notes/late.md"}


def test_unreachable_remote_is_retried_with_the_reason_then_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                  database: str) -> None:
    from shared.jobs.runner import run_step
    from shared.vault.sync import SYNC_STEP, request_sync, run_sync_step

    use_env(monkeypatch, MEM_VAULT_REMOTE="http://127.0.0.1:9/nowhere.git", MEM_VAULT_DIR=str(tmp_path / "vault"),
            MEM_JOB_MAX_ATTEMPTS="2")
    forget_vault()
    with session_scope() as session:
        job, created = request_sync(session, submitted_by="test", reason="test")
    assert created
    run_step(SYNC_STEP, job.id, run_sync_step)
    retrying = job_status(job.id)
    assert retrying["status"] == "queued", retrying
    assert "retrying" in retrying["error"] and "VaultRemoteUnreachable" in retrying["error"]
    assert "cannot clone the vault remote" in retrying["error"]

    run_step(SYNC_STEP, job.id, run_sync_step)
    failed = job_status(job.id)
    assert failed["status"] == "failed" and failed["error"].startswith("gave up after 2 attempts")
    assert not (tmp_path / "vault").exists() or not any((tmp_path / "vault").iterdir())


def test_missing_remote_setting_fails_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: str) -> None:
    from shared.jobs.runner import run_step
    from shared.vault.sync import SYNC_STEP, periodic_check, request_sync, run_sync_step

    use_env(monkeypatch, MEM_VAULT_REMOTE=None, MEM_VAULT_DIR=str(tmp_path / "vault"))
    from shared.config import get_settings

    assert periodic_check(get_settings())["status"] == "disabled"
    forget_vault()
    with session_scope() as session:
        job, _ = request_sync(session, submitted_by="test", reason="test")
    run_step(SYNC_STEP, job.id, run_sync_step)
    failed = job_status(job.id)
    assert failed["status"] == "failed" and "MEM_VAULT_REMOTE" in failed["error"]


def test_a_burst_of_requests_collapses_into_one_queued_job(database: str) -> None:
    from shared.vault.sync import request_sync

    forget_vault()
    ids: list[str] = []
    created: list[bool] = []
    barrier = threading.Barrier(8)

    def ask() -> None:
        barrier.wait()
        with session_scope() as session:
            job, made = request_sync(session, submitted_by="burst", reason="burst")
        ids.append(job.id)
        created.append(made)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert len(set(ids)) == 1 and created.count(True) == 1
        with session_scope() as session:
            queued = session.scalar(
                select(func.count()).select_from(Job).where(Job.kind == "sync", Job.status == "queued")
            )
        assert queued == 1
    finally:
        with session_scope() as session:
            store.cancel(session, ids[0])


def test_the_vault_lock_excludes_a_second_holder(synced: dict[str, Any]) -> None:
    from shared.config import get_settings
    from shared.vault.sync import VaultBusy, periodic_check, try_vault_lock, vault_lock

    settings = get_settings()
    with vault_lock(settings):
        seen: list[object] = []

        def contender() -> None:
            try:
                with vault_lock(settings, wait_secs=0.3):
                    seen.append("acquired")
            except VaultBusy as exc:
                seen.append(exc)

        thread = threading.Thread(target=contender)
        thread.start()
        thread.join(10)
        assert len(seen) == 1 and isinstance(seen[0], VaultBusy)
        with try_vault_lock(settings) as got:
            assert got is False
        assert periodic_check(settings)["status"] == "busy"
    with try_vault_lock(settings) as got:
        assert got is True


def test_periodic_check_queues_a_sync_only_when_the_remote_moved(synced: dict[str, Any]) -> None:
    from shared.config import get_settings
    from shared.vault.sync import periodic_check

    p, editor = synced["project"], synced["editor"]
    settings = get_settings()
    sent: list[tuple[str, str]] = []
    first = periodic_check(settings, send=lambda step, job: sent.append((step, job)))
    assert first["status"] == "queued" and "not been cloned" in first["reason"] and sent == [("sync", first["job_id"])]
    with session_scope() as session:
        store.cancel(session, first["job_id"])
    _sync()
    assert periodic_check(settings, send=lambda step, job: sent.append((step, job)))["status"] == "up-to-date"

    editor.write(f"{p}/notes/periodic.md", "# Periodic\n")
    editor.commit_and_push("moved")
    moved = periodic_check(settings, send=lambda step, job: sent.append((step, job)))
    assert moved["status"] == "queued" and "remote moved" in moved["reason"] and len(sent) == 2
    with session_scope() as session:
        store.cancel(session, moved["job_id"])


def test_a_vault_folder_that_is_not_a_working_copy_is_a_clear_error(synced: dict[str, Any]) -> None:
    from shared.jobs.runner import run_step
    from shared.vault.sync import SYNC_STEP, request_sync, run_sync_step

    synced["vault"].mkdir(parents=True)
    (synced["vault"] / "stray.md").write_text("# not git\n")
    with session_scope() as session:
        job, _ = request_sync(session, submitted_by="test", reason="test")
    run_step(SYNC_STEP, job.id, run_sync_step)
    failed = job_status(job.id)
    assert failed["status"] == "failed" and "not a git working copy" in failed["error"]
