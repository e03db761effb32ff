"""``/memory/context`` (three tiers) and ``/memory/diagnose`` over HTTP, against the real database and engines."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

import pytest

from tests.conftest import job_status

NPM_LOG = """$ npm ci
npm ERR! code ERESOLVE
npm ERR! ERESOLVE unable to resolve dependency tree
npm ERR! Found: react@17.0.2
The command "npm ci" exited with 1.
"""

PROJECT_DOCS = {
    "runbooks/npm-peer-dependencies.md": """# npm peer dependency conflicts

## Install fails with a dependency tree conflict

When `npm ci` stops because it cannot resolve the dependency tree (a peer dependency wants another
major version of react), upgrade react to the version the plugin asks for, or pin the plugin to a
release that supports the react version in use. Do not use --force in CI.
""",
}
REFERENCE_DOCS = {
    "rust/linker.md": """# Rust linker failures

## linker `cc` not found

A Rust crate fails to build with "linker `cc` not found" when the build image has no C toolchain.
Install build-essential (Debian, Ubuntu) or gcc in the image before running cargo build.
""",
}


@dataclass(frozen=True)
class Corpus:
    project: str
    reference: str


_corpus: Corpus | None = None


@pytest.fixture
def corpus(database: str) -> Corpus:
    """A project with an npm runbook and a reference corpus with a Rust note, ingested once per session."""
    global _corpus
    if _corpus is None:
        from shared.ingest.pipeline import ingest_inline

        suffix = uuid.uuid4().hex[:8]
        built = Corpus(project=f"dx-{suffix}", reference=f"dxref-{suffix}")
        for project, docs in ((built.project, PROJECT_DOCS), (built.reference, REFERENCE_DOCS)):
            ingest_inline(project, {"type": "inline", "documents": [{"path": p, "content": c} for p, c in docs.items()]})
        _corpus = built
    return _corpus


@pytest.fixture
def ctx_client(app, corpus):  # type: ignore[no-untyped-def]
    """A client of an app whose reference project is the test corpus's."""
    app.config["SETTINGS"] = app.config["SETTINGS"].model_copy(update={"reference_project": corpus.reference})
    return app.test_client()


def _context(client, headers, **params):  # type: ignore[no-untyped-def]
    r = client.get("/memory/context", query_string=params, headers=headers)
    assert r.status_code == 200, r.get_json()
    return r.get_json()


# --- /memory/context -------------------------------------------------------------------------------------


def test_tier_1_lessons_answer_first(ctx_client, admin_headers, corpus):  # type: ignore[no-untyped-def]
    lesson = ctx_client.post("/memory/lessons", headers=admin_headers, json={
        "project": corpus.project, "tool": "auto", "log": NPM_LOG, "title": "Peer conflict",
        "solution": "Upgrade react to 18.", "source": "https://forge/pr/7"}).get_json()
    r = ctx_client.post("/memory/context", headers=admin_headers, json={"log": NPM_LOG, "project": corpus.project})
    body = r.get_json()
    assert r.status_code == 200, body
    assert body["tier"] == 1 and body["confidence"] == "high"
    assert body["results"][0]["solution"] == "Upgrade react to 18." and body["results"][0]["source"] == "https://forge/pr/7"
    assert body["signature"]["sig_sha"] == lesson["sig_sha"]
    assert [t["name"] for t in body["tiers_tried"]] == ["lessons"]
    by_sha = _context(ctx_client, admin_headers, sig_sha=lesson["sig_sha"], project=corpus.project)
    assert by_sha["tier"] == 1 and by_sha["results"][0]["lesson_id"] == lesson["id"]


def test_tier_2_searches_the_project(ctx_client, admin_headers, corpus):  # type: ignore[no-untyped-def]
    body = _context(ctx_client, admin_headers, query="peer dependency conflict with react when installing packages",
                    project=corpus.project)
    assert body["tier"] == 2 and body["confidence"] == "medium", body
    assert body["results"][0]["source"] == "runbooks/npm-peer-dependencies.md"
    assert body["results"][0]["content"] and body["results"][0]["score"] > 0
    assert [(t["name"], t["results"] > 0) for t in body["tiers_tried"]] == [("lessons", False), ("project", True)]


def test_tier_3_falls_back_to_the_reference_corpus(ctx_client, admin_headers, corpus):  # type: ignore[no-untyped-def]
    body = _context(ctx_client, admin_headers, query="rust crate build fails: linker cc not found",
                    project=corpus.project)
    assert body["tier"] == 3 and body["confidence"] == "low", body
    assert body["results"][0]["source"] == "rust/linker.md"
    assert body["tiers_tried"][1]["name"] == "project" and body["tiers_tried"][1]["results"] == 0


def test_nothing_relevant_anywhere(ctx_client, admin_headers, corpus):  # type: ignore[no-untyped-def]
    body = _context(ctx_client, admin_headers, query="quarterly marketing budget for the autumn trade fair",
                    project=corpus.project)
    assert body["tier"] is None and body["confidence"] == "none" and body["results"] == []
    assert len(body["tiers_tried"]) == 3


def test_optimize_passes_results_through_the_optimizer(ctx_client, admin_headers, corpus):  # type: ignore[no-untyped-def]
    body = _context(ctx_client, admin_headers, query="peer dependency conflict with react when installing packages",
                    project=corpus.project, optimize="true")
    assert body["tier"] == 2 and body["results"][0]["content"]
    assert body["optimizer"]["chunks"] == len(body["results"]) and body["optimizer"]["tokens_before"] > 0


def test_context_isolation_and_bad_input(ctx_client, make_key, admin_headers, corpus):  # type: ignore[no-untyped-def]
    # A reader of another project gets no lessons and no search of the hidden project, but the reference corpus.
    headers = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=['elsewhere'])}"}
    body = _context(ctx_client, headers, query="peer dependency conflict with react when installing packages")
    assert all(r.get("project") != corpus.project for r in body["results"])
    assert ctx_client.get("/memory/context", query_string={"query": "x", "project": corpus.project},
                          headers=headers).status_code == 403
    r = ctx_client.get("/memory/context", query_string={"query": "x", "tool": "nope"}, headers=admin_headers)
    assert r.status_code == 400 and "npm" in r.get_json()["known_tools"]
    assert ctx_client.get("/memory/context", headers=admin_headers).status_code == 400
    assert ctx_client.get("/memory/context", query_string={"query": ""}, headers=admin_headers).status_code == 400
    r = ctx_client.post("/memory/context", json={"log": "  \n"}, headers=admin_headers)
    assert r.status_code == 400 and "empty" in r.get_json()["detail"]


# --- /memory/diagnose ------------------------------------------------------------------------------------


@pytest.fixture
def vault_env(monkeypatch, tmp_path, database):  # type: ignore[no-untyped-def]
    from tests.fixtures.vault.helpers import use_env

    use_env(monkeypatch, MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_VAULT_REMOTE=None)
    return tmp_path / "vault"


def _run(job_id: str) -> dict:  # type: ignore[type-arg]
    from shared.diagnosis.job import DIAGNOSIS_STEP, run_diagnosis_step
    from shared.jobs.runner import run_step

    run_step(DIAGNOSIS_STEP, job_id, run_diagnosis_step)
    return job_status(job_id)


def test_diagnose_accepts_a_job_and_replays_the_idempotency_key(client, admin_headers, project_name, vault_env):  # type: ignore[no-untyped-def]
    headers = {**admin_headers, "Idempotency-Key": f"diag-{project_name}"}
    r = client.post("/memory/diagnose", json={"project": project_name, "tool": "npm", "log": NPM_LOG}, headers=headers)
    assert r.status_code == 202, r.get_json()
    job = r.get_json()
    assert job["kind"] == "diagnosis" and job["status"] == "queued"
    assert r.headers["Location"].endswith(f"/memory/jobs/{job['id']}")
    again = client.post("/memory/diagnose", json={"project": project_name, "tool": "npm", "log": NPM_LOG}, headers=headers)
    assert again.status_code == 202 and again.get_json()["id"] == job["id"]

    done = _run(job["id"])
    assert done["status"] == "succeeded", done
    assert done["result"]["signature"]["tool"] == "npm"
    assert (vault_env / done["result"]["evidence"]["path"]).read_text() == NPM_LOG
    polled = client.get(r.headers["Location"], headers=admin_headers).get_json()
    assert polled["result"]["evidence"]["path"] == done["result"]["evidence"]["path"]


def test_diagnose_binary_log_is_decoded_with_replacement(client, admin_headers, project_name, vault_env):  # type: ignore[no-untyped-def]
    raw = b"\x1b[31m\xff\xfe binary junk \x00\x01\n" + NPM_LOG.encode()
    r = client.post("/memory/diagnose", headers=admin_headers,
                    json={"project": project_name, "log_base64": base64.b64encode(raw).decode()})
    assert r.status_code == 202, r.get_json()
    done = _run(r.get_json()["id"])
    assert done["status"] == "succeeded", done
    assert done["result"]["signature"]["tool"] == "npm"
    stored = (vault_env / done["result"]["evidence"]["path"]).read_text(encoding="utf-8")
    assert stored.startswith("\x1b[31m\ufffd\ufffd binary junk \ufffd\x01\n")


def test_diagnose_bad_input(client, make_key, admin_headers, project_name):  # type: ignore[no-untyped-def]
    cases = [
        ({"project": project_name, "log": ""}, 400, "empty"),
        ({"project": project_name, "log": " \n\t"}, 400, "empty"),
        ({"project": project_name}, 400, "log"),
        ({"project": project_name, "log": NPM_LOG, "tool": "frobnicator"}, 400, "known tools"),
        ({"project": project_name, "log": "x", "log_base64": "eA=="}, 400, "not both"),
        ({"project": "../etc", "log": NPM_LOG}, 400, "project"),
    ]
    for body, status, words in cases:
        r = client.post("/memory/diagnose", json=body, headers=admin_headers)
        assert r.status_code == status and words in str(r.get_json()), (body, r.get_json())
    reader = {"Authorization": f"Bearer {make_key(caps=['memory:read'])}"}
    assert client.post("/memory/diagnose", json={"project": project_name, "log": NPM_LOG}, headers=reader).status_code == 403
    other = {"Authorization": f"Bearer {make_key(caps=['memory:write'], projects=['elsewhere'])}"}
    assert client.post("/memory/diagnose", json={"project": project_name, "log": NPM_LOG}, headers=other).status_code == 403


def test_diagnose_body_limit_is_the_ingest_limit(settings, admin_headers, project_name, vault_env):  # type: ignore[no-untyped-def]
    from api.app import create_app

    app = create_app(settings.model_copy(update={"max_ingest_body_bytes": 200_000, "max_body_bytes": 1_000}))
    client = app.test_client()
    big = NPM_LOG + "noise line\n" * 10_000  # ~110 kB: over the small limit, under the ingest limit
    assert client.post("/memory/diagnose", json={"project": project_name, "log": big}, headers=admin_headers).status_code == 202
    huge = "x" * 300_000
    r = client.post("/memory/diagnose", json={"project": project_name, "log": huge}, headers=admin_headers)
    assert r.status_code == 413 and r.mimetype == "application/problem+json"
