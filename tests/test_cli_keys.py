"""``mem keys`` and ``mem roles`` through click's CliRunner, against the real database and the real API."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient

from cli.main import COMMAND_MODULES


@pytest.fixture
def mem(database: str):  # type: ignore[no-untyped-def]
    """Invoke ``mem ...`` in-process; returns the click Result."""
    import importlib

    from cli.app import mem as group

    for name in COMMAND_MODULES:
        importlib.import_module(name)
    runner = CliRunner()

    def run(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(group, list(args), catch_exceptions=False)

    return run


def test_create_use_list_and_revoke_a_key(mem, client: FlaskClient, project_name: str) -> None:  # type: ignore[no-untyped-def]
    name = f"ci-{uuid.uuid4().hex[:6]}"
    created = mem("keys", "create", "--name", name, "--caps", "memory:read,memory:write",
                  "--projects", f"{project_name},other")
    assert created.exit_code == 0, created.output
    plaintext = created.stdout.strip()
    assert plaintext.startswith("pmk_") and "shown once" in created.stderr
    key_id = plaintext.split("_")[1]
    headers = {"Authorization": f"Bearer {plaintext}"}
    assert client.get("/memory/projects", headers=headers).status_code == 200

    listed = json.loads(mem("keys", "list", "--json").stdout)
    mine = next(k for k in listed if k["key_id"] == key_id)
    assert mine["name"] == name and mine["revoked_at"] is None
    assert mine["capabilities"] == ["memory:read", "memory:write"]
    assert mine["projects"] == sorted([project_name, "other"])
    text = mem("keys", "list").stdout
    assert key_id in text and "active" in text
    secret = plaintext.split("_", 2)[2]  # pmk_<key id>_<secret>; the secret itself may contain "_"
    assert secret not in text + json.dumps(listed)  # the secret is never shown again

    assert mem("keys", "revoke", key_id).exit_code == 0
    assert client.get("/memory/projects", headers=headers).status_code == 401
    again = mem("keys", "revoke", key_id)
    assert again.exit_code == 1 and "no active key" in again.output
    assert "revoked" in mem("keys", "list").stdout


def test_key_without_projects_sees_every_project(mem) -> None:  # type: ignore[no-untyped-def]
    created = mem("keys", "create", "--name", "ops", "--caps", "memory:admin")
    key_id = created.stdout.strip().split("_")[1]
    listed = json.loads(mem("keys", "list", "--json").stdout)
    mine = next(k for k in listed if k["key_id"] == key_id)
    assert mine["projects"] is None
    assert mine["capabilities"] == ["memory:admin"]


@pytest.mark.parametrize("args", [
    ("--name", "x", "--caps", "memory:everything"),
    ("--name", "x", "--caps", ""),
    ("--name", "   ", "--caps", "memory:read"),
    ("--name", "n" * 300, "--caps", "memory:read"),
])
def test_bad_key_requests_are_usage_errors(mem, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    result = mem("keys", "create", *args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "pmk_" not in result.output


def test_roles_grant_list_revoke(mem, client: FlaskClient, oidc_issuer, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                 project_name: str) -> None:
    from api.app import create_app
    from shared.config import get_settings
    from shared.ingest.pipeline import ingest_inline
    from tests.oidc_issuer import DEFAULT_AUDIENCE

    ingest_inline(project_name, {"type": "inline", "documents": [{"path": "a.md", "content": "# A\n"}]})
    monkeypatch.setenv("MEM_OIDC_ISSUER", oidc_issuer.issuer)
    monkeypatch.setenv("MEM_OIDC_AUDIENCE", DEFAULT_AUDIENCE)
    get_settings.cache_clear()
    http = create_app(get_settings()).test_client()
    get_settings.cache_clear()
    role = f"sre-{uuid.uuid4().hex[:6]}"
    token = oidc_issuer.mint({"permissions": ["memory:read"], "groups": [role]})

    def visible() -> set[str]:
        resp = http.get("/memory/projects", headers={"Authorization": f"Bearer {token}"})
        return {p["name"] for p in resp.get_json()["projects"]}

    assert project_name not in visible()
    assert "granted" in mem("roles", "grant", role, project_name).stdout
    assert "already granted" in mem("roles", "grant", role, project_name).stdout
    assert json.loads(mem("roles", "list", "--json").stdout)[role] == [project_name]
    assert project_name in visible()
    assert mem("roles", "revoke", role, project_name).exit_code == 0
    assert project_name not in visible()
    assert mem("roles", "revoke", role, project_name).exit_code == 1
    bad = mem("roles", "grant", role, "Not A Project")
    assert bad.exit_code == 2 and "project must be" in bad.output
