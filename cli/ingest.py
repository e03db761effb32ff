"""``mem ingest``, ``mem jobs`` and ``mem keys``: talking to the job store and the key store directly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cli.app import mem


@mem.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--project", "-p", required=True, help="Project name (the vault's top-level folder).")
@click.option("--wait", is_flag=True, help="Wait for the job, with a progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
def ingest(path: Path, project: str, wait: bool, as_json: bool) -> None:
    """Ingest the markdown files under PATH into PROJECT (workers must be running: ``mem up``)."""
    from api.schemas import check_project_name
    from cli.stack import _submit_directory, _wait_for_jobs
    from shared.db.engine import session_scope
    from shared.jobs import store

    try:
        check_project_name(project)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--project") from None
    job_id = _submit_directory(path, project)
    if not as_json:
        click.echo(f"job {job_id} queued", err=True)
    ok = True
    if wait:
        ok = _wait_for_jobs([job_id])
    with session_scope() as session:
        view = store.get_job(session, job_id)
    assert view is not None
    if as_json:
        click.echo(json.dumps(view.to_dict(), indent=2))
    elif wait:
        result = view.result
        click.echo(
            f"{view.status}: {result.get('documents_seen', 0)} documents, {len(result.get('changed', []))} changed, "
            f"{len(result.get('removed', []))} removed, {result.get('chunks_indexed', 0)} chunks indexed, "
            f"{result.get('embedded', 0)} embedded"
        )
        for skipped in result.get("skipped", []):
            click.echo(f"  skipped {skipped['path']}: {skipped['reason']}")
        if view.error:
            click.echo(f"error: {view.error}", err=True)
    sys.exit(0 if ok else 1)


@mem.group()
def jobs() -> None:
    """Inspect jobs."""


@jobs.command("show")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True)
def jobs_show(job_id: str, as_json: bool) -> None:
    """Show one job's status, progress and result."""
    from shared.db.engine import session_scope
    from shared.jobs import store

    with session_scope() as session:
        view = store.get_job(session, job_id)
    if view is None:
        raise click.ClickException(f"no job {job_id}")
    data = view.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    progress = data["progress"]
    click.echo(f"{view.id}  {view.kind}  project={view.project}  {view.status}")
    click.echo(f"  step: {progress['current_step']}  progress: {progress['done']}/{progress['total']}  attempts: {view.attempts}")
    if view.error:
        click.echo(f"  error: {view.error}")
    for key, value in view.result.items():
        click.echo(f"  {key}: {value}")


@mem.group()
def keys() -> None:
    """Manage API keys for agents and CI."""


@keys.command("create")
@click.option("--name", required=True)
@click.option("--caps", default="memory:read", help="Comma-separated: memory:read,memory:write,memory:admin")
@click.option("--projects", default=None, help="Comma-separated projects (default: every project).")
def keys_create(name: str, caps: str, projects: str | None) -> None:
    """Create a key; it is printed once and only its hash is stored."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    try:
        with session_scope() as session:
            plaintext, info = keystore.create_key(
                session,
                name=name,
                capabilities=[c.strip() for c in caps.split(",") if c.strip()],
                projects=[p.strip() for p in projects.split(",") if p.strip()] if projects else None,
            )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(plaintext)
    click.echo(f"key id {info.key_id}: shown once, store it now", err=True)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True)
def keys_list(as_json: bool) -> None:
    """List keys (never their secrets)."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    with session_scope() as session:
        infos = keystore.list_keys(session)
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    for i in infos:
        state = "revoked" if i.revoked_at else "active"
        scope = ",".join(i.projects) if i.projects is not None else "*"
        click.echo(f"{i.key_id}  {state:7}  {','.join(i.capabilities):40}  projects={scope}  {i.name}")


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke a key by id."""
    from shared.db.engine import session_scope
    from shared.identity import keystore

    with session_scope() as session:
        if not keystore.revoke_key(session, key_id):
            raise click.ClickException(f"no active key {key_id}")
    click.echo(f"revoked {key_id}")
