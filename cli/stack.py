"""``mem up``, ``mem serve``, ``mem worker``, ``mem beat`` and ``mem db``: running the service."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import click

from cli.app import mem


def _apply_overrides(data_dir: str | None = None, port: int | None = None) -> None:
    """Command-line flags win over the environment; the child processes inherit them through it."""
    from shared.config import get_settings

    if data_dir:
        os.environ["MEM_DATA_DIR"] = str(Path(data_dir).expanduser().resolve())
    if port:
        os.environ["MEM_PORT"] = str(port)
    get_settings.cache_clear()


def _prepare_database() -> None:
    from shared.db.engine import get_engine, upgrade_database

    upgrade_database(get_engine())


def _wait_for_jobs(job_ids: list[str], timeout: float = 1800.0) -> bool:
    """Show one progress bar over several jobs; True when all succeeded."""
    from tqdm import tqdm

    from shared.db.engine import session_scope
    from shared.jobs import store

    deadline = time.monotonic() + timeout
    bar = tqdm(total=0, unit="item", desc="ingesting", file=sys.stderr, mininterval=0.5)
    last: tuple[int, int, str] | None = None
    try:
        while time.monotonic() < deadline:
            with session_scope() as session:
                views = [store.get_job(session, j) for j in job_ids]
            total = sum(v.progress_total for v in views if v)
            done = sum(v.progress_done for v in views if v)
            bar.total = max(total, 1)
            bar.n = min(done, bar.total)
            steps = ", ".join(sorted({v.progress_step for v in views if v and v.status not in store.FINISHED}))
            if (done, total, steps) != last:
                last = (done, total, steps)
                bar.set_postfix_str(steps or "finishing", refresh=False)
                bar.refresh()
            if all(v and v.status in store.FINISHED for v in views):
                bar.n = bar.total
                bar.refresh()
                return all(v and v.status == "succeeded" for v in views)
            time.sleep(0.3)
    finally:
        bar.close()
    return False


@mem.command()
@click.option("--demo", is_flag=True, help="Copy the sample vault into an empty vault and ingest it.")
@click.option("--port", type=int, default=None, help="API port (default 8080, or MEM_PORT).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory (MEM_DATA_DIR).")
def up(demo: bool, port: int | None, data_dir: str | None) -> None:
    """Start everything on this machine: database, workers, beat and the API."""
    _apply_overrides(data_dir, port)
    from shared.config import get_settings
    from shared.db.engine import session_scope
    from shared.identity import keystore
    from shared.identity.principal import ADMIN
    from shared.logjson import configure_logging
    from shared.stack import Stack, prepare_sample_vault, vault_projects

    settings = get_settings()
    configure_logging(settings.log_level)
    data = settings.resolved_data_dir
    click.echo(f"data directory: {data}", err=True)
    _prepare_database()
    if settings.auth == "on":
        with session_scope() as session:
            if not keystore.has_any_key(session):
                plaintext, _ = keystore.create_key(session, name="admin (created by mem up)", capabilities=[ADMIN],
                                                   projects=None, created_by="mem up")
                click.secho("\nAn admin API key was created. It is shown only this once; keep it safe:", fg="yellow")
                click.secho(f"  {plaintext}\n", bold=True)
                (data / "run").mkdir(parents=True, exist_ok=True)

    stack = Stack(settings)
    stack.start()
    click.echo("workers: " + ", ".join(f"{p.name} (pid {p.process.pid})" for p in stack.pools if p.process), err=True)

    def _shutdown(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _shutdown)
    try:
        if demo:
            vault = settings.resolved_vault_dir
            if prepare_sample_vault(vault):
                click.echo(f"sample vault written to {vault}", err=True)
            job_ids = [_submit_directory(vault / project, project) for project in vault_projects(vault)]
            ok = _wait_for_jobs(job_ids)
            click.echo("sample vault ingested" if ok else "ingest did not finish cleanly: see `mem jobs show`", err=True)
        _print_try_this(settings, demo)
        _serve(settings)
    except KeyboardInterrupt:
        click.echo("\nstopping...", err=True)
    finally:
        stack.stop()
        if settings.embedded_database:
            from shared.db import embedded
            from shared.db.engine import reset_engine

            reset_engine()
            embedded.stop(settings.resolved_data_dir)


def _submit_directory(path: Path, project: str) -> str:
    from shared.db.engine import session_scope
    from shared.ingest.pipeline import INGEST_KIND
    from shared.jobs import store
    from shared.jobs.broker import dispatch

    with session_scope() as session:
        job, _ = store.create_job(session, kind=INGEST_KIND, first_step="ingest", project=project,
                                  payload={"source": {"type": "directory", "path": str(path.resolve())}},
                                  submitted_by="cli")
        job_id = job.id
    dispatch("ingest", job_id)
    return job_id


def _print_try_this(settings, demo: bool) -> None:  # type: ignore[no-untyped-def]
    base = f"http://{settings.host}:{settings.port}"
    auth = '-H "Authorization: Bearer $MEM_KEY" ' if settings.auth == "on" else ""
    click.secho(f"\npoimen-memory is up on {base}", fg="green", bold=True)
    click.echo("try this:")
    if settings.auth == "on":
        click.echo("  export MEM_KEY=<the admin key printed above>")
    click.echo(f"  curl -s {auth}{base}/ready")
    click.echo(f"  curl -s {auth}{base}/memory/projects")
    if demo:
        click.echo(f"  curl -s {auth}'{base}/memory/query?project=platform&query=pod+keeps+restarting+after+deploy'")
        click.echo("  mem query 'KubePodCrashLooping' --project platform")
        click.echo(f"  curl -s {auth}{base}/memory/skills")
    click.echo("  mem ingest ./my-vault/team --project team --wait")
    click.echo("stop with Ctrl-C\n")


def _serve(settings) -> None:  # type: ignore[no-untyped-def]
    from waitress import serve

    from api.app import create_app

    serve(create_app(settings), host=settings.host, port=settings.port, threads=8, ident="poimen-memory")


@mem.command()
@click.option("--port", type=int, default=None)
@click.option("--data-dir", type=click.Path(file_okay=False), default=None)
def serve(port: int | None, data_dir: str | None) -> None:
    """Serve the API only (workers run elsewhere)."""
    _apply_overrides(data_dir, port)
    from shared.config import get_settings

    settings = get_settings()
    if settings.embedded_database:
        _prepare_database()
    _serve(settings)


@mem.command(context_settings={"ignore_unknown_options": True})
@click.option("-Q", "--queues", default=None, help="Comma-separated queues (default: all).")
@click.option("-c", "--concurrency", type=int, default=None, help="Worker processes in this pool.")
@click.option("-n", "--hostname", default=None, help="Node name, e.g. embed@%h.")
@click.option("--pool", default="prefork", help="Celery pool: prefork (default), solo or threads.")
def worker(queues: str | None, concurrency: int | None, hostname: str | None, pool: str) -> None:
    """Run a Celery worker pool, e.g. ``mem worker -Q embed -c 1``."""
    from shared.config import QUEUES
    from workers.celery_app import app

    chosen = queues or ",".join(QUEUES)
    unknown = sorted(set(chosen.split(",")) - set(QUEUES))
    if unknown:
        raise click.BadParameter(f"unknown queue(s) {unknown}; known: {', '.join(QUEUES)}", param_hint="-Q")
    argv = ["worker", "-Q", chosen, "--pool", pool, "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    if concurrency:
        argv += ["-c", str(concurrency)]
    if hostname:
        argv += ["-n", hostname]
    app.worker_main(argv=argv)


@mem.command()
def beat() -> None:
    """Run the periodic scheduler (lease sweep, periodic vault sync)."""
    from shared.config import get_settings
    from workers.celery_app import app

    run_dir = get_settings().resolved_data_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    app.start(argv=["beat", "--loglevel", "INFO", "-s", str(run_dir / "celerybeat-schedule")])


@mem.group()
def db() -> None:
    """Database administration."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply migrations (production: run once per release)."""
    _prepare_database()
    click.echo("database is at the latest migration")


@db.command("stop")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None)
def db_stop(data_dir: str | None) -> None:
    """Stop the embedded PostgreSQL of the data directory."""
    _apply_overrides(data_dir)
    from shared.config import get_settings
    from shared.db import embedded

    stopped = embedded.stop(get_settings().resolved_data_dir)
    click.echo("stopped" if stopped else "no embedded server was running")
