"""ForgejoClient against the swagger-checked HTTP stand-in (tests/forgejo_standin.py)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from shared.forge.client import (
    FileChange,
    ForgejoClient,
    ForgejoConflict,
    ForgejoError,
    ForgejoNotFound,
    ForgejoUnauthorized,
    ForgejoUnavailable,
    ForgejoValidationError,
    Identity,
)
from tests.forgejo_standin import TOKEN, StandIn, forgejo_standin, forgejo_swagger, git_blob_sha  # noqa: F401

# Every operation the client can perform; the flow test must exercise each one.
CLIENT_OPERATIONS = {
    "repoGet",
    "repoGetBranch",
    "repoCreateBranch",
    "repoGetContents",
    "repoChangeFiles",
    "repoCreatePullRequest",
    "repoGetPullRequest",
    "repoGetCombinedStatusByRef",
}


def make_client(standin: StandIn, **kwargs: Any) -> ForgejoClient:
    options: dict[str, Any] = {"timeout": 5, "retries": 2, "backoff": 0.01, **kwargs}
    return ForgejoClient(standin.base_url, options.pop("token", TOKEN), "team/vault", **options)


def test_full_proposal_flow_matches_the_swagger(forgejo_standin: StandIn) -> None:  # noqa: F811
    forgejo_standin.seed({"ops/runbooks/deploy.md": b"# Deploy\n", "ops/old.md": b"old\n", "ops/gone.md": b"x\n"})
    client = make_client(forgejo_standin)

    assert client.default_branch() == "main"
    assert client.repo_info()["full_name"] == "team/vault"
    main = client.get_branch("main")
    assert main.name == "main" and len(main.commit_sha) == 40

    deploy = client.get_file("ops/runbooks/deploy.md")
    assert deploy.content == b"# Deploy\n" and deploy.sha == git_blob_sha(b"# Deploy\n")
    old = client.get_file("ops/old.md", ref="main")
    gone = client.get_file("ops/gone.md")

    result = client.change_files(
        [
            FileChange("create", "ops/runbooks/canary.md", content="# Canary\n\nüber\n".encode()),
            FileChange("create", "ops/notes/on call & escalation.md", content=b"# On call\n"),
            FileChange("update", "ops/runbooks/deploy.md", content=b"# Deploy v2\n", sha=deploy.sha),
            FileChange("update", "ops/new.md", content=old.content, sha=old.sha, from_path="ops/old.md"),
            FileChange("delete", "ops/gone.md", sha=gone.sha),
        ],
        "Propose runbook changes",
        branch="main",
        new_branch="memory/proposal-1",
        author=Identity("Ada Agent", "ada@example.test"),
        committer=Identity("poimen-memory", "memory@example.test"),
    )
    assert len(result.commit_sha) == 40
    assert result.files["ops/runbooks/deploy.md"] == git_blob_sha(b"# Deploy v2\n")
    assert result.files["ops/gone.md"] is None
    assert client.get_file("ops/runbooks/deploy.md", ref="memory/proposal-1").content == b"# Deploy v2\n"
    assert client.get_file("ops/runbooks/deploy.md").content == b"# Deploy\n"  # main untouched
    spaced = client.get_file("ops/notes/on call & escalation.md", ref="memory/proposal-1")
    assert spaced.path == "ops/notes/on call & escalation.md" and spaced.content == b"# On call\n"
    with pytest.raises(ForgejoNotFound):
        client.get_file("ops/old.md", ref="memory/proposal-1")

    client.create_branch("memory/spare", "main")
    with pytest.raises(ForgejoConflict, match="already exists"):
        client.create_branch("memory/spare", "main")

    pull = client.create_pull_request("Runbook changes", head="memory/proposal-1", base="main", body="From an agent")
    assert (pull.number, pull.state, pull.merged, pull.head_ref, pull.base_ref) == (1, "open", False, "memory/proposal-1", "main")
    assert pull.html_url and pull.merge_commit_sha is None
    with pytest.raises(ForgejoConflict, match="already exists"):
        client.create_pull_request("Again", head="memory/proposal-1", base="main")

    forgejo_standin.add_status("memory/proposal-1", "ci/lint", "success")
    forgejo_standin.add_status("memory/proposal-1", "ci/test", "pending")
    status = client.combined_status("memory/proposal-1")
    assert status.sha == result.commit_sha and status.state == "pending"
    assert [(s.context, s.status) for s in status.statuses] == [("ci/lint", "success"), ("ci/test", "pending")]

    merge_sha = forgejo_standin.merge_pull(pull.number)
    merged = client.get_pull_request(pull.number)
    assert merged.merged and merged.state == "closed" and merged.merge_commit_sha == merge_sha
    assert client.get_file("ops/runbooks/canary.md").content == "# Canary\n\nüber\n".encode()

    assert set(forgejo_standin.operations) == CLIENT_OPERATIONS


def test_errors_map_to_exception_classes_with_the_server_message(forgejo_standin: StandIn) -> None:  # noqa: F811
    forgejo_standin.seed({"a.md": b"a\n"})
    client = make_client(forgejo_standin)
    with pytest.raises(ForgejoNotFound, match="branch does not exist"):
        client.get_branch("nope")
    with pytest.raises(ForgejoNotFound, match="HTTP 404"):
        client.get_pull_request(99)
    with pytest.raises(ForgejoValidationError, match="sha does not match"):
        client.change_files([FileChange("update", "a.md", content=b"b", sha="0" * 40)], "stale")
    with pytest.raises(ForgejoValidationError, match="already exists"):
        client.change_files([FileChange("create", "a.md", content=b"b")], "dup")
    with pytest.raises(ForgejoNotFound):
        ForgejoClient(forgejo_standin.base_url, TOKEN, "someone/else", retries=0).repo_info()

    with pytest.raises(ForgejoUnauthorized) as denied:
        make_client(forgejo_standin, token="wrong-token-value").repo_info()
    assert denied.value.status == 401
    assert "wrong-token-value" not in str(denied.value)
    with pytest.raises(ForgejoUnauthorized):
        make_client(forgejo_standin, token=None).repo_info()


def test_bad_arguments_are_refused_before_sending(forgejo_standin: StandIn) -> None:  # noqa: F811
    client = make_client(forgejo_standin)
    with pytest.raises(ValueError, match="needs the current file sha"):
        client.change_files([FileChange("delete", "a.md")], "x")
    with pytest.raises(ValueError, match="needs content"):
        client.change_files([FileChange("create", "a.md")], "x")
    with pytest.raises(ValueError, match="at least one"):
        client.change_files([], "x")
    with pytest.raises(ValueError, match="positive integer"):
        client.get_pull_request(0)
    with pytest.raises(ValueError, match="owner/name"):
        ForgejoClient(forgejo_standin.base_url, TOKEN, "no-slash")
    with pytest.raises(ValueError, match="http"):
        ForgejoClient("ftp://x", TOKEN, "a/b")
    assert forgejo_standin.requests == []


def test_api_url_forms() -> None:
    assert ForgejoClient("https://forge.example/", "t", "a/b").api_url == "https://forge.example/api/v1"
    assert ForgejoClient("https://forge.example/api/v1", "t", "a/b").api_url == "https://forge.example/api/v1"
    assert ForgejoClient("https://x.example/git", "t", "a/b").api_url == "https://x.example/git/api/v1"


def test_get_is_retried_on_5xx(forgejo_standin: StandIn) -> None:  # noqa: F811
    client = make_client(forgejo_standin, retries=3)
    forgejo_standin.fail_next(2, status=503)
    assert client.default_branch() == "main"
    assert len(forgejo_standin.requests) == 3


def test_get_gives_up_after_the_retries(forgejo_standin: StandIn) -> None:  # noqa: F811
    client = make_client(forgejo_standin, retries=2)
    forgejo_standin.fail_next(5, status=502)
    with pytest.raises(ForgejoUnavailable, match="HTTP 502: injected failure"):
        client.repo_info()
    assert len(forgejo_standin.requests) == 3  # first try + 2 retries


def test_post_is_not_retried_after_reaching_the_server(forgejo_standin: StandIn) -> None:  # noqa: F811
    client = make_client(forgejo_standin, retries=3)
    forgejo_standin.fail_next(1, status=503)
    with pytest.raises(ForgejoUnavailable, match="503"):
        client.create_branch("memory/x", "main")
    assert len(forgejo_standin.requests) == 1
    assert "memory/x" not in forgejo_standin.repo.branches


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_forge_is_a_clear_error() -> None:
    client = ForgejoClient(f"http://127.0.0.1:{closed_port()}", TOKEN, "team/vault", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(ForgejoUnavailable, match="unreachable"):
        client.repo_info()
    with pytest.raises(ForgejoUnavailable, match="unreachable"):  # POST too: retried only on connect errors
        client.create_branch("b", "main")


def test_shared_session_gets_retries_only_for_the_forge(forgejo_standin: StandIn) -> None:  # noqa: F811
    session = requests.Session()
    client = make_client(forgejo_standin, session=session, retries=2)
    adapter = session.get_adapter(client.api_url + "/repos/x")
    assert adapter.max_retries.total == 2
    assert session.get_adapter("https://elsewhere.example/").max_retries.total == 0
    forgejo_standin.fail_next(1)
    assert client.default_branch() == "main"


def test_standin_rejects_requests_that_break_the_swagger(forgejo_standin: StandIn) -> None:  # noqa: F811
    """The contract check can fail: raw requests that Forgejo would not accept are caught."""
    api = forgejo_standin.base_url + "/api/v1"
    auth = {"Authorization": f"token {TOKEN}"}
    bad = [
        requests.post(f"{api}/repos/team/vault/branches", json={"old_ref_name": "main"}, headers=auth, timeout=5),
        requests.post(f"{api}/repos/team/vault/branches", json={"new_branch_name": 5}, headers=auth, timeout=5),
        requests.post(f"{api}/repos/team/vault/branches", json={"new_branch": "x"}, headers=auth, timeout=5),
        requests.post(f"{api}/repos/team/vault/contents", json={"files": [{"path": "a"}]}, headers=auth, timeout=5),
        requests.get(f"{api}/repos/team/vault/pulls/abc", headers=auth, timeout=5),
        requests.get(f"{api}/repos/team/vault?colour=red", headers=auth, timeout=5),
        requests.put(f"{api}/repos/team/vault/branches", json={}, headers=auth, timeout=5),
        requests.get(f"{api}/repos/team/vault/no-such-endpoint", headers=auth, timeout=5),
    ]
    assert [r.status_code for r in bad] == [400] * len(bad)
    reasons = "\n".join(forgejo_standin.violations)
    for expected in [
        "'new_branch_name' is a required property",
        "5 is not of type 'string'",
        "body.new_branch is not a field",
        "'operation' is a required property",
        "path parameter index='abc'",
        "query parameter 'colour' is not declared",
        "PUT is not defined",
        "no swagger path matches",
    ]:
        assert expected in reasons
    forgejo_standin.violations.clear()


def test_client_reports_non_json_answers(forgejo_standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    client = make_client(forgejo_standin)
    original = forgejo_standin.handle

    def garbled(*args: Any) -> tuple[int, Any]:
        original(*args)
        return 200, "not an object"

    monkeypatch.setattr(forgejo_standin, "handle", garbled)
    with pytest.raises(ForgejoError, match="not a JSON object"):
        client.repo_info()
