"""The deployment files name commands and queues that exist (they are not run here: no Docker engine)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from cli.main import COMMAND_MODULES
from shared.config import QUEUES

REPO = Path(__file__).resolve().parent.parent


def _mem_cli():  # type: ignore[no-untyped-def]
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name)
    from cli.app import mem

    return mem


def test_compose_commands_exist_and_queues_are_known():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mem = _mem_cli()
    commands = [svc["command"] for svc in compose["services"].values() if isinstance(svc.get("command"), list)]
    assert commands, "the compose file runs mem commands"
    for command in commands:
        assert command[0] == "mem"
        words = [w for w in command[1:] if not w.startswith("-")][:2]
        result = CliRunner().invoke(mem, [*words[:1], "--help"] if words[0] != "db" else ["db", words[1], "--help"])
        assert result.exit_code == 0, (command, result.output)
        if "-Q" in command:
            assert set(command[command.index("-Q") + 1].split(",")) <= set(QUEUES)


def test_helm_worker_pools_cover_every_queue():
    values = yaml.safe_load((REPO / "helm" / "poimen-memory" / "values.yaml").read_text())
    covered = {q for pool in values["workerPools"] for q in pool["queues"].split(",")}
    assert covered == set(QUEUES)
