"""``mem ingest`` and ``mem jobs show`` against real workers; a git repository as an ingest source."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cli.app import mem
from tests.conftest import wait_for_job
from tests.gitserver import git_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture
def cli():  # type: ignore[no-untyped-def]
    import importlib

    from cli.main import COMMAND_MODULES

    for name in COMMAND_MODULES:
        importlib.import_module(name)
    return CliRunner()


def test_mem_ingest_waits_and_prints_the_job(cli, tmp_path, project_name, start_worker):
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "disk.md").write_text(f"# Disk full {project_name}\n\n## Fix\n\nRun `du -sh /var`.\n")
    (tmp_path / "runbooks" / "blob.md").write_bytes(b"\x00\x01binary")
    start_worker()
    result = cli.invoke(mem, ["ingest", str(tmp_path), "--project", project_name, "--wait", "--json"])
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)
    assert job["status"] == "succeeded"
    assert job["result"]["changed"] == ["runbooks/disk.md"]
    assert job["result"]["skipped"] == [{"path": "runbooks/blob.md", "reason": "file looks binary (contains NUL bytes)"}]

    shown = cli.invoke(mem, ["jobs", "show", job["id"], "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["id"] == job["id"]
    human = cli.invoke(mem, ["jobs", "show", job["id"]])
    assert "succeeded" in human.output and "changed" in human.output
    assert cli.invoke(mem, ["jobs", "show", "nope"]).exit_code != 0
    assert cli.invoke(mem, ["ingest", str(tmp_path), "--project", "Not Valid"]).exit_code == 2


def test_git_repository_source(client, admin_headers, project_name, start_worker, git_server):  # noqa: F811
    url = git_server.create_repo("team", files={"runbooks/dns.md": f"# DNS {project_name}\n\nCheck CoreDNS pods.\n",
                                                "README.txt": "not markdown"})
    worker = start_worker()
    response = client.post("/memory/ingest", headers=admin_headers,
                           json={"project": project_name, "source": {"type": "git", "url": url, "ref": "main"}})
    assert response.status_code == 202
    job = wait_for_job(response.get_json()["id"], worker=worker)
    assert job["status"] == "succeeded", job
    assert job["result"]["changed"] == ["runbooks/dns.md"]

    missing = client.post("/memory/ingest", headers=admin_headers,
                          json={"project": project_name, "source": {"type": "git", "url": url, "ref": "no-such-branch"}})
    failed = wait_for_job(missing.get_json()["id"], worker=worker)
    assert failed["status"] == "failed" and "git clone failed" in failed["error"]
