"""End to end: a push to a real git remote over HTTP -> signed webhook -> real workers -> both indexes.

The vault remote is ``git http-backend`` behind the test's HTTP server; the webhook goes through the Flask
app; the sync, ingest, embed and index steps run in a real ``mem worker`` process with the real embedder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from shared.db.engine import session_scope
from shared.db.models import ChunkRow, Job, Project, VaultEvent
from shared.vault.git import GitRepo
from tests.conftest import wait_for, wait_for_job
from tests.fixtures.vault.helpers import (
    chunk_sources,
    forget_vault,
    indexed_commit,
    lexical_sources,
    merged_pr_payload,
    published_events,
    signed,
    use_env,
)
from tests.gitserver import GitServer, git_server  # noqa: F401

pytestmark = pytest.mark.slow

SECRET = "e2e-webhook-secret"
WAIT_SECS = 120


@pytest.fixture
def e2e(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, git_server: GitServer, project_name: str,  # noqa: F811
        database: str) -> Iterator[dict[str, Any]]:
    p = project_name
    url = git_server.create_repo("vault", files={
        f"{p}/runbooks/deploy.md": "# Deploy\n\n## Canary\n\nShip to the ibexcanary first.\n",
        f"{p}/runbooks/legacy.md": "# Legacy\n\nThe gazelleprocedure moves soon.\n",
        f"{p}/notes/obsolete.md": "# Obsolete\n\nThe marmotnote is deleted by the merge.\n",
    })
    use_env(monkeypatch, MEM_VAULT_REMOTE=url, MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_WEBHOOK_SECRET=SECRET,
            MEM_RATE_LIMIT_ENABLED="false", MEM_SYNC_INTERVAL_SECS="0")
    forget_vault()
    yield {"project": p, "editor": git_server.editor("vault"), "server": git_server, "vault": tmp_path / "vault"}
    forget_vault(p)


def _vectors(project: str, source: str) -> tuple[int, int]:
    with session_scope() as session:
        base = select(func.count()).select_from(ChunkRow).join(Project).where(
            Project.name == project, ChunkRow.source == source
        )
        return session.scalar(base) or 0, session.scalar(base.where(ChunkRow.embedding.is_not(None))) or 0


def _sync_counts() -> tuple[int, int]:
    with session_scope() as session:
        jobs = session.scalar(select(func.count()).select_from(Job).where(Job.kind == "sync")) or 0
        events = session.scalar(select(func.count()).select_from(VaultEvent).where(VaultEvent.kind == "webhook")) or 0
    return jobs, events


def test_merged_pull_request_webhook_reindexes_the_vault(e2e, client, admin_headers, start_worker) -> None:
    p, editor, server = e2e["project"], e2e["editor"], e2e["server"]
    worker = start_worker(concurrency=2)

    # 1. The first delivery clones the vault and indexes it.
    push = {"ref": "refs/heads/main", "after": server.branch_sha("vault"), "repository": {"full_name": "team/vault"}}
    first = client.post("/memory/hooks/forgejo", **_request(push, event="push"))
    assert first.status_code == 202 and first.get_json()["status"] == "queued", first.get_json()
    job = wait_for_job(first.get_json()["job_id"], timeout=WAIT_SECS, worker=worker)
    assert job["status"] == "succeeded", job
    seed = server.branch_sha("vault")
    wait_for(lambda: indexed_commit(p) == seed, timeout=WAIT_SECS, message="the seed commit to be indexed")
    assert lexical_sources(p, "ibexcanary") == {"runbooks/deploy.md"}
    total, embedded = _vectors(p, "runbooks/deploy.md")
    assert total > 0 and embedded == total, "chunks have vectors from the real embedder"

    # 2. Someone merges a change that adds, edits, renames and deletes documents.
    editor.write(f"{p}/runbooks/rollback.md", "# Rollback\n\nThe oryxrollback procedure.\n")
    editor.write(f"{p}/runbooks/deploy.md", "# Deploy\n\n## Canary\n\nShip to the lynxcanary first.\n")
    editor.rename(f"{p}/runbooks/legacy.md", f"{p}/archive/legacy.md")
    editor.delete(f"{p}/notes/obsolete.md")
    head = editor.commit_and_push("Merge pull request #7")
    answer = client.post("/memory/hooks/forgejo", **_request(merged_pr_payload(merge_sha=head)))
    assert answer.status_code == 202 and answer.get_json()["status"] == "queued", answer.get_json()
    sync = wait_for_job(answer.get_json()["job_id"], timeout=WAIT_SECS, worker=worker)
    assert sync["status"] == "succeeded", sync
    (plan,) = [r for r in sync["result"]["projects"] if r["project"] == p]
    assert plan["mode"] == "changes" and plan["changed"] == 3 and plan["deleted"] == 2

    wait_for(lambda: indexed_commit(p) == head, timeout=WAIT_SECS, message="the merge commit to be indexed")
    assert lexical_sources(p, "oryxrollback") == {"runbooks/rollback.md"}
    assert lexical_sources(p, "lynxcanary") == {"runbooks/deploy.md"}
    assert lexical_sources(p, "ibexcanary") == set()
    assert lexical_sources(p, "gazelleprocedure") == {"archive/legacy.md"}
    assert lexical_sources(p, "marmotnote") == set(), "the deleted file is gone from the lexical index"
    chunks = chunk_sources(p)
    assert "notes/obsolete.md" not in chunks and "runbooks/legacy.md" not in chunks, "and from the vector side"
    total, embedded = _vectors(p, "runbooks/rollback.md")
    assert total > 0 and embedded == total
    event = published_events(p)[-1]
    assert event["commit"] == head and "runbooks/rollback.md" in event["changed"]

    # 3. A search hit's source + chunk id resolve to the section in the vault read API.
    with session_scope() as session:
        chunk = session.scalars(
            select(ChunkRow).join(Project).where(Project.name == p, ChunkRow.source == "runbooks/deploy.md",
                                                 ChunkRow.anchor == "canary")
        ).first()
        assert chunk is not None
        chunk_id = chunk.id
    read = client.get(f"/memory/vault/{p}/runbooks/deploy.md?highlight={chunk_id}", headers=admin_headers)
    assert read.status_code == 200 and read.get_json()["highlight"]["anchor"] == "canary"
    assert read.get_json()["last_commit"]["sha"] == head

    # 4. A forged delivery after another push changes nothing.
    editor.write(f"{p}/notes/forged.md", "# Forged\n\nThe forgedmarkerword must not appear.\n")
    pushed = editor.commit_and_push("not announced")
    body, headers = signed("wrong-secret", merged_pr_payload(merge_sha=pushed))
    before = _sync_counts()
    refused = client.post("/memory/hooks/forgejo", data=body, headers=headers)
    assert refused.status_code == 401
    assert _sync_counts() == before
    assert GitRepo(e2e["vault"]).head_sha() == head, "the working copy did not move"
    assert lexical_sources(p, "forgedmarkerword") == set() and indexed_commit(p) == head


def _request(payload: dict[str, Any], *, event: str = "pull_request") -> dict[str, Any]:
    body, headers = signed(SECRET, payload, event=event)
    return {"data": body, "headers": headers}
