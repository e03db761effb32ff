"""POST /memory/hooks/forgejo through the Flask app: signatures, event filtering, dedup, burst collapse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from shared.db.engine import session_scope
from shared.db.models import Job, VaultEvent
from tests.fixtures.vault.helpers import forget_vault, merged_pr_payload, signed, use_env

SECRET = "webhook-test-secret"
HOOK = "/memory/hooks/forgejo"


@pytest.fixture
def hook_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: str) -> Iterator[None]:
    use_env(monkeypatch, MEM_WEBHOOK_SECRET=SECRET, MEM_VAULT_REMOTE="http://127.0.0.1:9/vault.git",
            MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_FORGEJO_REPO="team/vault", MEM_RATE_LIMIT_ENABLED="false")
    forget_vault()
    yield
    forget_vault()


def _counts() -> tuple[int, int]:
    with session_scope() as session:
        jobs = session.scalar(select(func.count()).select_from(Job).where(Job.kind == "sync"))
        events = session.scalar(select(func.count()).select_from(VaultEvent).where(VaultEvent.kind == "webhook"))
    return jobs or 0, events or 0


def _post(client, body: bytes, headers: dict[str, str]):  # type: ignore[no-untyped-def]
    return client.post(HOOK, data=body, headers=headers)


def test_a_signed_merge_queues_one_sync_and_a_burst_joins_it(hook_env, client) -> None:
    first = _post(client, *signed(SECRET, merged_pr_payload(merge_sha="a" * 40)))
    assert first.status_code == 202, first.get_json()
    answer = first.get_json()
    assert answer["status"] == "queued" and answer["job_id"] and "merged into main" in answer["reason"]
    for event in ("push", "pull_request"):
        payload: dict[str, Any] = (
            {"ref": "refs/heads/main", "after": "b" * 40, "repository": {"full_name": "team/vault"}}
            if event == "push" else merged_pr_payload()
        )
        burst = _post(client, *signed(SECRET, payload, event=event))
        assert burst.status_code == 202 and burst.get_json()["job_id"] == answer["job_id"]
        assert "joined the queued sync" in burst.get_json()["reason"]
    with session_scope() as session:
        queued = session.scalars(select(Job).where(Job.kind == "sync", Job.status == "queued")).all()
        assert [j.id for j in queued] == [answer["job_id"]]
        assert queued[0].submitted_by == "webhook"


def test_the_same_delivery_twice_is_recorded_once(hook_env, client) -> None:
    body, headers = signed(SECRET, merged_pr_payload(), delivery="delivery-fixed-1")
    assert _post(client, body, headers).status_code == 202
    before = _counts()
    again = _post(client, body, headers)
    assert again.status_code == 200 and again.get_json()["status"] == "duplicate"
    assert _counts() == before


@pytest.mark.parametrize(
    ("mutate", "status"),
    [
        (lambda h: h.pop("X-Forgejo-Signature") and h.pop("X-Gitea-Signature"), 401),
        (lambda h: h.update({"X-Forgejo-Signature": "0" * 64, "X-Gitea-Signature": "0" * 64}), 401),
        (lambda h: h.update({"X-Gitea-Signature": "f" * 64}), 401),  # one good, one forged
        (lambda h: h.update({"X-Forgejo-Signature": "not hex at all"}), 401),
    ],
)
def test_missing_or_forged_signatures_change_nothing(hook_env, client, mutate, status) -> None:
    body, headers = signed(SECRET, merged_pr_payload())
    mutate(headers)
    before = _counts()
    answer = _post(client, body, headers)
    assert answer.status_code == status and answer.mimetype == "application/problem+json"
    assert "signature" in answer.get_json()["detail"]
    assert _counts() == before


def test_a_body_signed_with_another_secret_or_altered_is_refused(hook_env, client) -> None:
    body, headers = signed("another-secret", merged_pr_payload())
    assert _post(client, body, headers).status_code == 401
    body, headers = signed(SECRET, merged_pr_payload())
    assert _post(client, body.replace(b"closed", b"opened"), headers).status_code == 401


def test_gitea_only_signature_header_is_accepted(hook_env, client) -> None:
    body, headers = signed(SECRET, merged_pr_payload())
    del headers["X-Forgejo-Signature"]
    assert _post(client, body, headers).status_code == 202


@pytest.mark.parametrize(
    ("event", "payload", "reason"),
    [
        ("pull_request", {**merged_pr_payload(), "action": "opened"}, "not closed"),
        ("pull_request", {**merged_pr_payload(), "pull_request": {"merged": False, "base": {"ref": "main"}}},
         "without merging"),
        ("pull_request", merged_pr_payload(branch="develop"), "not the default branch"),
        ("push", {"ref": "refs/heads/feature", "after": "c" * 40}, "not to the default branch"),
        ("issues", {"action": "opened"}, "does not change the vault"),
        ("pull_request", merged_pr_payload(repo="someone/else"), "not the vault repository"),
    ],
)
def test_other_events_are_ignored_with_a_reason(hook_env, client, event, payload, reason) -> None:
    jobs_before, _ = _counts()
    answer = _post(client, *signed(SECRET, payload, event=event))
    assert answer.status_code == 202
    assert answer.get_json()["status"] == "ignored" and reason in answer.get_json()["reason"]
    assert _counts()[0] == jobs_before


@pytest.mark.parametrize(("body", "detail"), [(b"not json", "not valid JSON"), (b"[1, 2]", "not a JSON object"),
                                              (b"", "not valid JSON"), (b"[" * 100_000, "nested too deeply")])
def test_signed_bodies_that_are_not_json_objects_are_400(hook_env, client, body, detail) -> None:
    before = _counts()
    answer = _post(client, *signed(SECRET, body))
    assert answer.status_code == 400 and detail in answer.get_json()["detail"]
    assert _counts() == before


def test_without_a_configured_secret_nothing_is_accepted(monkeypatch, hook_env, client) -> None:
    use_env(monkeypatch, MEM_WEBHOOK_SECRET=None)
    from api.app import create_app
    from shared.config import get_settings

    bare = create_app(get_settings()).test_client()
    answer = _post(bare, *signed(SECRET, merged_pr_payload()))
    assert answer.status_code == 503 and "MEM_WEBHOOK_SECRET" in answer.get_json()["detail"]


def test_without_a_vault_remote_a_merge_is_ignored(monkeypatch, hook_env, client) -> None:
    use_env(monkeypatch, MEM_VAULT_REMOTE=None)
    from api.app import create_app
    from shared.config import get_settings

    bare = create_app(get_settings()).test_client()
    answer = _post(bare, *signed(SECRET, merged_pr_payload()))
    assert answer.status_code == 202 and answer.get_json()["status"] == "ignored"
    assert "MEM_VAULT_REMOTE" in answer.get_json()["reason"]


def test_the_webhook_is_in_the_openapi_document(hook_env, client) -> None:
    spec = client.get("/openapi.json").get_json()
    operation = spec["paths"]["/memory/hooks/forgejo"]["post"]
    assert "security" not in operation and {"200", "202", "400", "401"} <= set(operation["responses"])
    for path in ("/memory/vault", "/memory/vault/{project}", "/memory/vault/{project}/{file}",
                 "/memory/vault/generate", "/memory/grc/draft", "/memory/grc/status"):
        assert path in spec["paths"], path
