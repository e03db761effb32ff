"""``mem sig explain``: the lessons recorded for a failure signature or a symptom, from the database.

``explain`` is a click command object that is not attached to ``mem`` here: ``cli/sig.py`` owns the
``sig`` command and attaches it as ``mem sig explain``. Like ``mem jobs`` it runs in-process against the
database (the operator's view: every project unless ``--project`` narrows it).
"""

from __future__ import annotations

import json

import click


@click.command("explain")
@click.option("--sig-sha", default=None, help="The sig_sha printed by `mem sig`.")
@click.option("--tool", default="auto", show_default=True, help="Tool of the symptom (npm, cargo, ...); needed with --query.")
@click.option("--query", default=None, help="The failure in words, e.g. \"unable to resolve dependency\".")
@click.option("--project", default=None, help="Only lessons of this project.")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200), help="Most solutions to list.")
def explain(sig_sha: str | None, tool: str, query: str | None, project: str | None, limit: int) -> None:
    """Print {found, sig_sha, count, solutions: [{source, timestamp, solution, success_rate}]} as JSON.

    Exit code 1 when no lesson matches, 2 for bad usage (unknown tool, malformed sig_sha, nothing to look for).
    """
    from shared.db.engine import session_scope
    from shared.diagnosis import UnknownToolError
    from shared.diagnosis.lessons import LessonError
    from shared.diagnosis.lessons import explain as explain_lessons

    if sig_sha is None and not (query and query.strip()):
        raise click.UsageError("give --sig-sha SHA or --tool TOOL --query TEXT")
    try:
        with session_scope() as session:
            answer = explain_lessons(
                session, [project] if project else None, tool=tool, sig_sha=sig_sha, query=query, limit=limit
            )
    except (LessonError, UnknownToolError) as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(json.dumps(answer, ensure_ascii=False, indent=2))
    if not answer["found"]:
        raise SystemExit(1)
