"""End to end: POST /memory/ingest -> real worker processes -> pgvector and the lexical index -> succeeded."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from sqlalchemy import func, select

from shared.db.engine import session_scope
from shared.db.models import ChunkRow, Document, Project
from tests.conftest import REPO, job_status, wait_for, wait_for_job

pytestmark = pytest.mark.slow


def _runbook(i: int, marker: str, sections: int = 3, words: int = 40) -> str:
    body = []
    for s in range(sections):
        filler = " ".join(f"step{s}word{w}" for w in range(words))
        body.append(f"## Section {s} of runbook {i}\n\nRun `kubectl get pods -n team{i}` then check {filler}.\n")
    return f"---\ntitle: Runbook {i} {marker}\ntags: [k8s, r{i}]\n---\n# Runbook {i}\n\nIntro for runbook {i}.\n\n" + "\n".join(body)


def _docs(marker: str) -> list[dict[str, str]]:
    """Documents with a per-test marker, so vectors cached from other tests' identical text are not reused."""
    return [
        {"path": "runbooks/crashloop.md", "content": f"# Crash loops {marker}\n\n## Diagnosis\n\nThe alert KubePodCrashLooping fires when a container restarts repeatedly.\n\n```bash\n# not a heading\nkubectl logs --previous pod/x\n```\n\n## Mitigation\n\nRoll back with kubectl rollout undo.\n"},
        {"path": "skills/rollback.md", "content": f"---\ntitle: Roll back a deployment\ndescription: Return to the previous ReplicaSet\ntags: [deploy]\n---\n# Roll back {marker}\n\nUse `kubectl rollout undo deployment/web`.\n"},
        {"path": "evidence/empty.md", "content": "   \n"},
    ]


def _post_ingest(client, headers, project: str, docs: list[dict[str, str]], **extra: Any):  # type: ignore[no-untyped-def]
    body = {"project": project, "source": {"type": "inline", "documents": docs, **extra}}
    return client.post("/memory/ingest", json=body, headers=headers)


def _chunk_stats(project: str) -> tuple[int, int]:
    with session_scope() as session:
        pid = session.scalar(select(Project.id).where(Project.name == project))
        total = session.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.project_id == pid))
        embedded = session.scalar(
            select(func.count()).select_from(ChunkRow).where(ChunkRow.project_id == pid, ChunkRow.embedding.is_not(None))
        )
    return total or 0, embedded or 0


def _lexical_count(project: str) -> int:
    from shared.config import get_settings
    from shared.search.lexical_factory import get_lexical_index

    return get_lexical_index(get_settings()).count(project)


def _lexical_hits(project: str, text: str) -> list[str]:
    from shared.config import get_settings
    from shared.search.lexical import LexicalQuery
    from shared.search.lexical_factory import get_lexical_index

    hits = get_lexical_index(get_settings()).search(LexicalQuery(text=text, projects=[project], limit=10))
    return [h.source for h in hits]


def _ingest_and_check(client, admin_headers, project_name, worker) -> None:  # type: ignore[no-untyped-def]
    response = _post_ingest(client, admin_headers, project_name, _docs(project_name))
    assert response.status_code == 202, response.get_json()
    assert response.headers["Location"].endswith(f"/memory/ingest/{response.get_json()['id']}")
    job_id = response.get_json()["id"]
    job = wait_for_job(job_id, worker=worker)
    assert job["status"] == "succeeded", job
    polled = client.get(response.headers["Location"], headers=admin_headers).get_json()
    assert polled["status"] == "succeeded" and polled["progress"]["fraction"] == 1.0
    result = job["result"]
    assert sorted(result["changed"]) == ["runbooks/crashloop.md", "skills/rollback.md"]
    assert result["skipped"] == [{"path": "evidence/empty.md", "reason": "file is empty"}]
    total, embedded = _chunk_stats(project_name)
    assert total > 0 and embedded == total
    assert _lexical_count(project_name) == total
    assert set(_lexical_hits(project_name, "KubePodCrashLooping")) == {"runbooks/crashloop.md"}
    skills = client.get(f"/memory/skills?project={project_name}", headers=admin_headers).get_json()["skills"]
    assert [s["title"] for s in skills] == ["Roll back a deployment"]
    projects = {p["name"]: p for p in client.get("/memory/projects", headers=admin_headers).get_json()["projects"]}
    assert projects[project_name]["chunks"] == total


def test_ingest_end_to_end_on_the_embedded_broker(client, admin_headers, project_name, start_worker):
    worker = start_worker()
    _ingest_and_check(client, admin_headers, project_name, worker)


def test_ingest_end_to_end_on_redis(redis_broker, client, admin_headers, project_name, start_worker):
    worker = start_worker(env={"MEM_REDIS_URL": redis_broker})
    _ingest_and_check(client, admin_headers, project_name, worker)


def test_reingest_of_unchanged_documents_costs_no_embedding(client, admin_headers, project_name, start_worker):
    worker = start_worker()
    first = wait_for_job(_post_ingest(client, admin_headers, project_name, _docs(project_name)).get_json()["id"], worker=worker)
    assert first["status"] == "succeeded" and first["result"]["embedded"] > 0
    again = wait_for_job(_post_ingest(client, admin_headers, project_name, _docs(project_name)).get_json()["id"], worker=worker)
    assert again["status"] == "succeeded"
    assert again["result"]["changed"] == [] and again["result"]["embedded"] == 0
    assert again["result"]["unchanged"] == 2, "the two stored documents are unchanged; the empty one is skipped again"

    # Change one document and delete another: only that one is re-embedded, the deleted one leaves both indexes.
    docs = _docs(project_name)
    docs[0] = {**docs[0], "content": docs[0]["content"] + "\n## Escalation\n\nPage the platform on-call.\n"}
    third = wait_for_job(
        _post_ingest(client, admin_headers, project_name, docs[:1], delete=["skills/rollback.md"]).get_json()["id"],
        worker=worker,
    )
    assert third["status"] == "succeeded", third
    assert third["result"]["changed"] == ["runbooks/crashloop.md"]
    assert third["result"]["removed"] == ["skills/rollback.md"]
    assert third["result"]["embeddings_reused"] > 0, "unchanged sections of a changed document reuse their vectors"
    assert _lexical_hits(project_name, "ReplicaSet") == []
    total, embedded = _chunk_stats(project_name)
    assert total == embedded == _lexical_count(project_name)
    with session_scope() as session:
        paths = session.scalars(select(Document.path).join(Project).where(Project.name == project_name)).all()
    assert paths == ["runbooks/crashloop.md"]


def test_sigkilled_worker_mid_ingest_loses_nothing(client, admin_headers, project_name, start_worker, base_env):
    fast_lease = {"MEM_JOB_LEASE_SECS": "4", "MEM_SWEEP_INTERVAL_SECS": "1", "MEM_EMBED_BATCH_SIZE": "8"}
    docs = [{"path": f"runbooks/r{i:03}.md", "content": _runbook(i, project_name)} for i in range(40)]
    victim = start_worker(env=fast_lease)
    job_id = _post_ingest(client, admin_headers, project_name, docs).get_json()["id"]
    wait_for(
        lambda: (j := job_status(job_id))["step"] == "embed" and j["progress"]["done"] > 0,
        timeout=120,
        message="the embed step to make progress",
    )
    victim.kill9()
    assert job_status(job_id)["status"] in ("running", "queued")

    beat = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "beat"], cwd=REPO, env={**os.environ, **fast_lease},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        rescuer = start_worker(env=fast_lease)
        job = wait_for_job(job_id, timeout=240, worker=rescuer)
    finally:
        beat.terminate()
        beat.wait(20)
    assert job["status"] == "succeeded", job
    assert job["attempts"] >= 2, "the sweep must have re-enqueued the job"
    total, embedded = _chunk_stats(project_name)
    expected = job["result"]["chunks_written"]
    assert total == embedded == expected
    assert _lexical_count(project_name) == total, "no chunk missing or duplicated in the lexical index"
