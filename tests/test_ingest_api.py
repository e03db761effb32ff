"""Bad input to the ingest API: a clear 4xx problem, and nothing already stored is lost."""

from __future__ import annotations

import pytest

from shared.ingest.pipeline import ingest_inline
from tests.conftest import job_status


@pytest.fixture
def stored(project_name):  # type: ignore[no-untyped-def]
    """A project with one document already ingested."""
    job_id = ingest_inline(project_name, {"type": "inline", "documents": [
        {"path": "runbooks/keep.md", "content": f"# Keep me {project_name}\n\nImportant text.\n"}]})
    assert job_status(job_id)["status"] == "succeeded"
    return project_name


def _problem(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == status and body["detail"] and body["request_id"]
    assert "Traceback" not in response.get_data(as_text=True)
    return body


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"project": "x"}', "source"),
        (b'{"project": "../etc", "source": {"type": "inline", "documents": []}}', "project"),
        (b'{"project": "Bad Name", "source": {"type": "inline", "documents": []}}', "project"),
        (b'{"project": "ok", "source": {"type": "ftp"}}', "source"),
        (b'{"project": "ok", "source": {"type": "inline", "documents": []}, "extra": 1}', "extra"),
        (b'{"project": "ok", "source": {"type": "directory", "path": "../../etc"}}', "vault"),
        (b'{"project": "ok", "source": {"type": "inline", "documents": [{"path": "a.md", "content": "x\\u0000y"}]}}', "NUL"),
        ('{"project": "ok", "source": {"type": "inline", "documents": [{"path": "\u00e9.md", "content": 5}]}}'.encode(), "content"),
        (b'\xff\xfe{"project": 1}', "JSON"),
    ],
)
def test_malformed_requests_are_400_problems(client, admin_headers, stored, body, needle):
    response = client.post("/memory/ingest", data=body, headers={**admin_headers, "Content-Type": "application/json"})
    problem = _problem(response, 400)
    assert needle.lower() in (problem["detail"] + str(problem.get("errors", ""))).lower()
    projects = {p["name"]: p for p in client.get("/memory/projects", headers=admin_headers).get_json()["projects"]}
    assert projects[stored]["documents"] == 1, "a rejected request must not touch stored data"


def test_wrong_content_type_is_415(client, admin_headers):
    _problem(client.post("/memory/ingest", data="project=x", headers={**admin_headers, "Content-Type": "text/plain"}), 415)


def test_huge_body_is_413(client, admin_headers, settings):
    big = b'{"project": "x", "source": {"type": "inline", "documents": [{"path": "a.md", "content": "' + b"a" * (
        settings.max_ingest_body_bytes + 10) + b'"}]}}'
    _problem(client.post("/memory/ingest", data=big, headers={**admin_headers, "Content-Type": "application/json"}), 413)


@pytest.mark.parametrize(
    ("path", "needle"),
    [("../escape.md", "'..'"), ("/abs.md", "relative"), (".git/config.md", "dotfile"), ("notes.txt", "markdown"),
     ("a\\b.md", "backslash"), ("runbooks/%2e%2e/x.md", "percent")],
)
def test_unsafe_document_paths_are_400_naming_the_path(client, admin_headers, project_name, path, needle):
    docs = [{"path": "ok.md", "content": "# fine\n"}, {"path": path, "content": "# x\n\ntext\n"}]
    response = client.post("/memory/ingest", json={"project": project_name, "source": {"type": "inline", "documents": docs}},
                           headers=admin_headers)
    problem = _problem(response, 400)
    assert needle in problem["detail"] and "documents[1]" in problem["detail"]


def test_idempotency_key_returns_the_same_job(client, admin_headers, project_name):
    body = {"project": project_name, "source": {"type": "inline", "documents": [{"path": "a.md", "content": "# a\n"}]}}
    headers = {**admin_headers, "Idempotency-Key": "same-key"}
    first = client.post("/memory/ingest", json=body, headers=headers)
    second = client.post("/memory/ingest", json=body, headers=headers)
    assert first.status_code == second.status_code == 202
    assert first.get_json()["id"] == second.get_json()["id"]
    conflict = client.post("/memory/ingest", json={**body, "project": project_name + "x"}, headers=headers)
    _problem(conflict, 422)


def test_unknown_job_is_404_and_jobs_of_hidden_projects_too(client, admin_headers, make_key, stored):
    _problem(client.get("/memory/ingest/not-a-job", headers=admin_headers), 404)
    outsider = {"Authorization": f"Bearer {make_key(caps=['memory:write'], projects=['someone-else'])}"}
    body = {"project": stored, "source": {"type": "inline", "documents": [{"path": "b.md", "content": "# b\n"}]}}
    own = client.post("/memory/ingest", json=body, headers=admin_headers).get_json()["id"]
    _problem(client.get(f"/memory/ingest/{own}", headers=outsider), 404)
    _problem(client.post("/memory/ingest", json=body, headers=outsider), 403)
    readonly = {"Authorization": f"Bearer {make_key(caps=['memory:read'])}"}
    _problem(client.post("/memory/ingest", json=body, headers=readonly), 403)
