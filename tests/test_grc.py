"""Edit through review: POST /memory/grc/draft and GET /memory/grc/status against the swagger-checked stand-in."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.vault.helpers import use_env
from tests.forgejo_standin import TOKEN, StandIn, forgejo_standin, forgejo_swagger  # noqa: F401

DOC = "ops/runbooks/deploy.md"
ORIGINAL = b"# Deploy\n\nThe original text.\n"


@pytest.fixture
def forge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, forgejo_standin: StandIn, database: str) -> StandIn:  # noqa: F811
    use_env(monkeypatch, MEM_FORGEJO_URL=forgejo_standin.base_url, MEM_FORGEJO_TOKEN=TOKEN,
            MEM_FORGEJO_REPO="team/vault", MEM_VAULT_DIR=str(tmp_path / "vault"), MEM_RATE_LIMIT_ENABLED="false",
            MEM_MAX_DOCUMENT_BYTES="5000")
    forgejo_standin.seed({DOC: ORIGINAL, "ops/notes/old.md": b"# Old\n", "web/index.md": b"# Web\n"})
    return forgejo_standin


def _draft(client, headers: dict[str, str], **body: Any):  # type: ignore[no-untyped-def]
    payload = {"document_path": DOC, "content": "# Deploy\n\nBetter text.\n", "message": "Improve the deploy runbook",
               **body}
    return client.post("/memory/grc/draft", json=payload, headers=headers)


def _writer(make_key, projects: list[str] | None = None) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"Authorization": f"Bearer {make_key(caps=['memory:write'], projects=projects or ['ops'], name='writer')}"}


def test_draft_commits_on_an_edit_branch_and_opens_a_pull_request(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    answer = _draft(client, headers)
    assert answer.status_code == 201, answer.get_json()
    draft = answer.get_json()
    assert re.fullmatch(r"edit/api-key-[a-z0-9-]+/deploy-\d{14}", draft["branch"]), draft["branch"]
    assert draft["operation"] == "update" and draft["pr_number"] == 1 and draft["pr_url"]
    assert answer.headers["Location"] == draft["pr_url"]
    branch_tip = forge.repo.resolve(draft["branch"])
    assert branch_tip.tree[DOC] == b"# Deploy\n\nBetter text.\n" and branch_tip.sha == draft["commit"]
    assert branch_tip.author["name"] == "writer", "the author is the principal"
    assert forge.repo.resolve("main").tree[DOC] == ORIGINAL, "the default branch is untouched until the merge"
    pull = forge.repo.pulls[1]
    assert pull["title"] == "Improve the deploy runbook" and pull["base"]["ref"] == "main"
    assert "writer" in pull["body"]


def test_two_drafts_in_the_same_second_get_distinct_branches(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    first, second = _draft(client, headers), _draft(client, headers, content="# Deploy\n\nOther text.\n")
    assert first.status_code == second.status_code == 201, second.get_json()
    assert first.get_json()["branch"] != second.get_json()["branch"]
    assert second.get_json()["pr_number"] == 2


def test_new_files_and_deletions_are_drafts_too(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    created = _draft(client, headers, document_path="ops/runbooks/canary.md", content="# Canary\n", message="Add")
    assert created.status_code == 201 and created.get_json()["operation"] == "create"
    assert forge.repo.resolve(created.get_json()["branch"]).tree["ops/runbooks/canary.md"] == b"# Canary\n"
    deleted = _draft(client, headers, document_path="ops/notes/old.md", content=None, message="Remove the old note")
    assert deleted.status_code == 201 and deleted.get_json()["operation"] == "delete"
    assert "ops/notes/old.md" not in forge.repo.resolve(deleted.get_json()["branch"]).tree
    missing = _draft(client, headers, document_path="ops/notes/never.md", content=None, message="Remove")
    assert missing.status_code == 404
    same = _draft(client, headers, content=ORIGINAL.decode(), message="No change")
    assert same.status_code == 422 and "does not change" in same.get_json()["detail"]


def test_a_stale_base_commit_is_409_with_the_current_commit_and_creates_nothing(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    base = forge.repo.branches["main"]
    fresh = _draft(client, headers, base_commit=base)
    assert fresh.status_code == 201, "the document is unchanged since base_commit"

    current = forge.seed({DOC: b"# Deploy\n\nSomeone else edited this.\n"}, message="concurrent edit")
    branches, pulls = dict(forge.repo.branches), dict(forge.repo.pulls)
    stale = _draft(client, headers, base_commit=base)
    assert stale.status_code == 409, stale.get_json()
    assert stale.get_json()["current_commit"] == current
    assert forge.repo.branches == branches and forge.repo.pulls == pulls, "no branch, commit or pull request"

    created_since = _draft(client, headers, document_path="ops/runbooks/new.md", content="# New\n", message="m",
                           base_commit=base)
    assert created_since.status_code == 201, "a file absent at base and absent now is a plain creation"
    forge.seed({"ops/runbooks/raced.md": b"# Raced\n"})
    raced = _draft(client, headers, document_path="ops/runbooks/raced.md", content="# Mine\n", message="m",
                   base_commit=base)
    assert raced.status_code == 409, "the file appeared after base_commit"


def test_status_follows_the_pull_request_through_ci_and_merge(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    draft = _draft(client, headers).get_json()
    opened = client.get(f"/memory/grc/status?pr={draft['pr_number']}", headers=headers).get_json()
    assert opened["state"] == "open" and opened["mergeable"] is True and opened["merged_at"] is None
    assert opened["ci"] == {"state": "none", "statuses": []}

    forge.add_status(draft["branch"], "ci/lint", "success")
    forge.add_status(draft["branch"], "ci/test", "pending")
    pending = client.get(f"/memory/grc/status?pr={draft['pr_number']}", headers=headers).get_json()
    assert pending["ci"]["state"] == "pending" and [s["context"] for s in pending["ci"]["statuses"]] == ["ci/lint", "ci/test"]

    merge = forge.merge_pull(draft["pr_number"])
    merged = client.get(f"/memory/grc/status?pr={draft['pr_number']}", headers=headers).get_json()
    assert merged["state"] == "merged" and merged["merged_at"] and merged["merge_commit"] == merge


def test_access_rules(forge: StandIn, client, make_key) -> None:
    reader = {"Authorization": f"Bearer {make_key(caps=['memory:read'], projects=['ops'])}"}
    assert _draft(client, reader).status_code == 403
    web_writer = _writer(make_key, projects=["web"])
    assert _draft(client, web_writer).status_code == 403, "a writer of another project cannot edit ops"
    draft = _draft(client, _writer(make_key)).get_json()
    assert client.get(f"/memory/grc/status?pr={draft['pr_number']}", headers=web_writer).status_code == 403
    other = forge.repo.pulls.setdefault(99, {**forge.repo.pulls[draft["pr_number"]], "number": 99})
    assert other["number"] == 99
    assert client.get("/memory/grc/status?pr=99", headers=_writer(make_key)).status_code == 404, \
        "pull requests this service did not open are for admins only"
    admin = {"Authorization": f"Bearer {make_key()}"}
    assert client.get("/memory/grc/status?pr=99", headers=admin).status_code == 200
    assert client.get("/memory/grc/status?pr=12345", headers=admin).status_code == 404


@pytest.mark.parametrize(
    ("document_path", "detail"),
    [
        ("ops/../web/index.md", ".."),
        ("ops/%2e%2e/web/index.md", ".."),
        ("../etc/passwd.md", "project name"),
        ("ops/.git/config.md", ".git"),
        ("ops/runbooks\\deploy.md", "'\\'"),
        ("/ops/deploy.md", "project"),
        ("ops/runbooks/deploy.txt", "markdown"),
        ("deploy.md", "<project>/<path"),
        ("ops/\uff0e\uff0e/x.md", "look-alike"),
    ],
)
def test_bad_document_paths_are_400(forge: StandIn, client, make_key, document_path: str, detail: str) -> None:
    answer = _draft(client, _writer(make_key), document_path=document_path)
    assert answer.status_code == 400, answer.get_json()
    assert detail.lower() in answer.get_json()["detail"].lower()
    assert forge.repo.pulls == {}


def test_bad_bodies(forge: StandIn, client, make_key) -> None:
    headers = _writer(make_key)
    assert _draft(client, headers, base_commit="not-a-sha").status_code == 400
    assert _draft(client, headers, content="x" * 6000).status_code == 413
    assert _draft(client, headers, unexpected=1).status_code == 400
    assert client.post("/memory/grc/draft", data="{", headers={**headers, "Content-Type": "application/json"}).status_code == 400
    assert client.get("/memory/grc/status?pr=0", headers=headers).status_code == 400
    assert client.get("/memory/grc/status?pr=abc", headers=headers).status_code == 400


def test_forge_failures_are_gateway_errors(forge: StandIn, client, make_key, monkeypatch: pytest.MonkeyPatch) -> None:
    from api.app import create_app
    from shared.config import get_settings

    use_env(monkeypatch, MEM_FORGEJO_TOKEN="wrong-token-0000")
    refused = create_app(get_settings()).test_client()
    answer = _draft(refused, _writer(make_key))
    assert answer.status_code == 502 and "HTTP 401" in answer.get_json()["detail"]

    use_env(monkeypatch, MEM_FORGEJO_URL=None)
    unconfigured = create_app(get_settings()).test_client()
    answer = _draft(unconfigured, _writer(make_key))
    assert answer.status_code == 503 and "MEM_FORGEJO_URL" in answer.get_json()["detail"]
