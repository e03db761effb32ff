"""``Idempotency-Key`` over HTTP: replay, conflict, principal scoping, expiry, failures and concurrency."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from flask.testing import FlaskClient
from sqlalchemy import func, select, text

from shared.db.engine import session_scope
from shared.db.models import IdempotencyRecord, Job
from tests.wsgi_server import serving


def _body(project: str, content: str = "# A\n\nhello\n") -> dict[str, Any]:
    return {"project": project, "source": {"type": "inline", "documents": [{"path": "a.md", "content": content}]}}


def _post(client: FlaskClient, headers: dict[str, str], body: dict[str, Any] | str, key: str | None):  # type: ignore[no-untyped-def]
    extra = {"Idempotency-Key": key} if key is not None else {}
    if isinstance(body, str):
        return client.post("/memory/ingest", data=body, content_type="application/json",
                           headers={**headers, **extra})
    return client.post("/memory/ingest", json=body, headers={**headers, **extra})


def _jobs_of(project: str) -> int:
    with session_scope() as session:
        return int(session.scalar(select(func.count()).select_from(Job).where(Job.project == project)) or 0)


def test_same_key_same_body_replays_the_first_response(client: FlaskClient, admin_headers: dict[str, str],
                                                       project_name: str) -> None:
    first = _post(client, admin_headers, _body(project_name), "key-1")
    assert first.status_code == 202 and "Idempotent-Replayed" not in first.headers
    # The same JSON with other key order and spacing is the same request.
    reordered = json.dumps({"source": _body(project_name)["source"], "project": project_name}, indent=3)
    for again in (_post(client, admin_headers, _body(project_name), "key-1"),
                  _post(client, admin_headers, reordered, "key-1")):
        assert again.status_code == 202
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.headers["Location"] == first.headers["Location"]
        assert again.get_data() == first.get_data()  # byte for byte, job id included
        assert again.headers["X-Request-ID"] != first.headers["X-Request-ID"]
    assert _jobs_of(project_name) == 1


def test_same_key_different_body_is_422(client: FlaskClient, admin_headers: dict[str, str],
                                        project_name: str) -> None:
    assert _post(client, admin_headers, _body(project_name), "key-2").status_code == 202
    resp = _post(client, admin_headers, _body(project_name, "# B\n\nother\n"), "key-2")
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    assert "Idempotency-Key" in resp.get_json()["detail"]
    assert _jobs_of(project_name) == 1


def test_keys_are_scoped_to_the_principal(client: FlaskClient, make_key: Callable[..., str],
                                          project_name: str) -> None:
    alice = {"Authorization": f"Bearer {make_key(caps=['memory:write'])}"}
    bob = {"Authorization": f"Bearer {make_key(caps=['memory:write'])}"}
    a = _post(client, alice, _body(project_name), "shared-key")
    b = _post(client, bob, _body(project_name), "shared-key")
    assert a.status_code == b.status_code == 202
    assert "Idempotent-Replayed" not in b.headers
    assert a.get_json()["id"] != b.get_json()["id"]
    # Bob reusing the key with another body conflicts only with his own first request.
    assert _post(client, bob, _body(project_name, "# C\n"), "shared-key").status_code == 422


def test_without_a_key_every_post_creates_work(client: FlaskClient, admin_headers: dict[str, str],
                                               project_name: str) -> None:
    ids = {_post(client, admin_headers, _body(project_name), None).get_json()["id"] for _ in range(2)}
    assert len(ids) == 2


@pytest.mark.parametrize("key", ["", " ", "k" * 201, "ключ", "has space", "tab\there", "nul\x00byte"])
def test_malformed_keys_are_400(client: FlaskClient, admin_headers: dict[str, str], project_name: str,
                                key: str) -> None:
    resp = _post(client, admin_headers, _body(project_name), key)
    assert resp.status_code == 400 and resp.mimetype == "application/problem+json"
    assert _jobs_of(project_name) == 0


def test_failed_requests_are_not_recorded(client: FlaskClient, admin_headers: dict[str, str],
                                          project_name: str) -> None:
    missing_dir = {"project": project_name, "source": {"type": "directory", "path": "no/such/dir"}}
    assert _post(client, admin_headers, missing_dir, "retry-me").status_code == 400
    # The key is still free: a corrected request with it runs (no 422 against the failed one).
    resp = _post(client, admin_headers, _body(project_name), "retry-me")
    assert resp.status_code == 202 and "Idempotent-Replayed" not in resp.headers


def _age_record(key: str, seconds: int) -> None:
    with session_scope() as session:
        session.execute(text("UPDATE idempotency_keys SET created_at = now() - make_interval(secs => :s) "
                             "WHERE key = :k"), {"s": seconds, "k": key})


def test_records_expire_after_the_ttl(client: FlaskClient, admin_headers: dict[str, str],
                                      project_name: str) -> None:
    first = _post(client, admin_headers, _body(project_name), "old-key")
    _age_record("old-key", 25 * 3600)
    again = _post(client, admin_headers, _body(project_name), "old-key")
    assert again.status_code == 202
    assert "Idempotent-Replayed" not in again.headers  # the HTTP record was gone, the view ran again...
    assert again.get_json()["id"] == first.get_json()["id"]  # ...and the job store still gave one job
    with session_scope() as session:
        age = session.scalar(select(func.now() - IdempotencyRecord.created_at)
                             .where(IdempotencyRecord.key == "old-key"))
    assert age is not None and age.total_seconds() < 3600  # a fresh record replaced the expired one


def test_a_claim_still_running_is_409_and_an_abandoned_one_is_taken_over(
        client: FlaskClient, admin_headers: dict[str, str], make_key: Callable[..., str], project_name: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from api import idempotency

    key = make_key(caps=["memory:write"])
    headers = {"Authorization": f"Bearer {key}"}
    principal = f"api_key:{key.split('_')[1]}"
    body = _body(project_name)
    raw = json.dumps(body).encode()

    with client.application.test_request_context("/memory/ingest", method="POST", data=raw,
                                                 content_type="application/json"):
        fingerprint = idempotency.request_fingerprint()
    with session_scope() as session:
        session.add(IdempotencyRecord(principal=principal, key="busy", request_sha=fingerprint,
                                      status_code=idempotency.PENDING, body={}, headers={}))
    monkeypatch.setattr(idempotency, "WAIT_FOR_FIRST_SECS", 0.3)
    resp = client.post("/memory/ingest", data=raw, content_type="application/json",
                       headers={**headers, "Idempotency-Key": "busy"})
    assert resp.status_code == 409 and resp.headers["Retry-After"] == "1"
    assert _jobs_of(project_name) == 0

    _age_record("busy", idempotency.STALE_CLAIM_SECS + 60)  # its owner died mid-request
    resp = client.post("/memory/ingest", data=raw, content_type="application/json",
                       headers={**headers, "Idempotency-Key": "busy"})
    assert resp.status_code == 202 and _jobs_of(project_name) == 1


def test_concurrent_duplicates_run_the_work_once(app: Any, admin_headers: dict[str, str],
                                                 project_name: str) -> None:
    body = _body(project_name)

    def submit(_: int) -> tuple[int, str, bool]:
        resp = requests.post(f"{base}/memory/ingest", json=body, timeout=60,
                             headers={**admin_headers, "Idempotency-Key": "race"})
        return resp.status_code, resp.json().get("id", ""), "Idempotent-Replayed" in resp.headers

    with serving(app) as base, ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(submit, range(20)))
    assert {status for status, _, _ in results} == {202}
    assert len({job_id for _, job_id, _ in results}) == 1
    assert sum(not replayed for _, _, replayed in results) == 1  # one ran the view, 19 were replays
    assert _jobs_of(project_name) == 1
