"""``mem sig``: the failure signature of CI logs (one JSON object per log)."""

from __future__ import annotations

import json
import sys

import click

from cli.app import mem


def _tool_choice(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Validate --tool against the rule tables; a clear error lists the known tools (exit 2)."""
    from shared.diagnosis import UnknownToolError, resolve_tool

    try:
        return resolve_tool(value)
    except UnknownToolError as exc:
        raise click.BadParameter(str(exc)) from exc


@mem.group("sig", invoke_without_command=True)
@click.option(
    "--tool",
    default="auto",
    show_default=True,
    callback=_tool_choice,
    help="Tool that produced the log (npm, cargo, go, pytest, maven, docker, ...); auto detects it.",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Log file (repeatable; '-' is stdin). Without --file the log is read from stdin.",
)
@click.option("--json", "as_json", is_flag=True, help="Compact JSON (one line per log) even for a single log.")
@click.option("--max-errors", default=50, show_default=True, type=click.IntRange(0, 10_000), help="Cap on listed error lines.")
@click.pass_context
def sig(ctx: click.Context, tool: str, files: tuple[str, ...], as_json: bool, max_errors: int) -> None:
    """Print the failure signature of a CI log: the line that explains the failure, normalised and hashed.

    Exit code 1 when no log has a recognisable error (no signature is made up).
    ``mem sig explain`` looks up the lessons recorded for a signature or a symptom.
    """
    if ctx.invoked_subcommand is not None:
        return
    from shared.diagnosis import extract_signature
    from shared.diagnosis.lines import iter_lines

    sources = files or ("-",)
    any_found = False
    for source in sources:
        # Bytes in, decoded with replacement, read in blocks: binary or huge input never crashes or fills memory.
        if source == "-":
            result = extract_signature(iter_lines(sys.stdin.buffer), tool, max_errors=max_errors)
        else:
            with open(source, "rb") as stream:
                result = extract_signature(iter_lines(stream), tool, max_errors=max_errors)
        payload = result.to_dict()
        if len(sources) > 1:
            payload = {"file": source, **payload}
        any_found = any_found or result.found
        if as_json or len(sources) > 1:
            click.echo(json.dumps(payload, ensure_ascii=False, sort_keys=False))
        else:
            click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    if not any_found:
        raise SystemExit(1)


def _attach_explain() -> None:
    # `explain` lives with the lesson store (cli/lessons.py); it is a subcommand of `sig` for the user.
    from cli.lessons import explain

    sig.add_command(explain)


_attach_explain()
