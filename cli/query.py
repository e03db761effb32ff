"""``mem query``: a hybrid search run in this process against the database and the lexical index."""

from __future__ import annotations

import json
import sys

import click

from cli.app import mem


def _print_results(data: dict[str, object]) -> None:
    route = data["route"]
    assert isinstance(route, dict)
    click.echo(f"{data['search_method']} ({route['rule']}: {route['reason']})", err=True)
    for warning in data.get("warnings", []) or []:  # type: ignore[union-attr]
        click.secho(f"warning: {warning}", fg="yellow", err=True)
    results = data["results"]
    assert isinstance(results, list)
    if not results:
        click.echo("no results")
    for number, item in enumerate(results, start=1):
        where = f"{item['project']}/{item['source']}" + (f"#{item['anchor']}" if item["anchor"] else "")
        click.secho(f"{number:>2}. {item['score']:.3f}  {where}", bold=True)
        click.echo(f"    {item['breadcrumb']}")
        if "breakdown" in item:
            click.echo(f"    {item['breakdown']['reason']}")
        snippet = " ".join(str(item["text"]).split())
        click.echo(f"    {snippet[:200]}{'...' if len(snippet) > 200 else ''}")
    metrics = data["metrics"]
    assert isinstance(metrics, dict)
    click.echo(f"{metrics['total_ms']:.1f} ms", err=True)


@mem.command()
@click.argument("text")
@click.option("--project", "-p", required=True, help="Project to search.")
@click.option("--method", type=click.Choice(["auto", "hybrid", "semantic", "lexical"]), default="auto",
              show_default=True)
@click.option("--fusion", type=click.Choice(["linear", "rrf"]), default="linear", show_default=True)
@click.option("--weights", default=None, help="semantic,lexical weights summing to 1, e.g. 0.6,0.4")
@click.option("--limit", "-n", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--level", "levels", type=click.IntRange(0, 2), multiple=True, help="Only chunks of this level.")
@click.option("--source", "source_pattern", default=None, help="Glob over vault paths, e.g. 'runbooks/*'.")
@click.option("--tag", "tags", multiple=True, help="Only chunks with this tag (repeatable).")
@click.option("--since", default=None, help="Only chunks updated since this ISO 8601 date or date-time.")
@click.option("--context", "context_chunks", type=click.IntRange(0, 5), default=0,
              help="Neighbouring chunks to show on each side.")
@click.option("--json", "as_json", is_flag=True, help="Print the full response as JSON.")
def query(text: str, project: str, method: str, fusion: str, weights: str | None, limit: int,
          levels: tuple[int, ...], source_pattern: str | None, tags: tuple[str, ...], since: str | None,
          context_chunks: int, as_json: bool) -> None:
    """Search PROJECT for TEXT by meaning and exact terms (the same code as GET /memory/query)."""
    from shared.catalog import project_exists
    from shared.db.engine import session_scope
    from shared.search.lexical import LexicalFilters
    from shared.search.query import QueryError, QueryRequest, SearchUnavailable, parse_since, run_query

    parsed_weights = None
    if weights is not None:
        try:
            w_sem, w_lex = (float(part) for part in weights.split(","))
        except ValueError:
            raise click.BadParameter("give two numbers, semantic,lexical, e.g. 0.6,0.4", param_hint="--weights") from None
        parsed_weights = (w_sem, w_lex)
    try:
        updated_since = parse_since(since)
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None
    with session_scope() as session:
        if not project_exists(session, project):
            raise click.BadParameter(f"unknown project '{project}'", param_hint="--project")
    request = QueryRequest(
        query=text,
        projects=[project],
        limit=limit,
        method=method,  # type: ignore[arg-type]
        weights=parsed_weights,
        fusion=fusion,  # type: ignore[arg-type]
        filters=LexicalFilters(levels=levels, source_pattern=source_pattern, updated_since=updated_since,
                               tags=tags),
        context_chunks=context_chunks,
    )
    try:
        result = run_query(request)
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None
    except SearchUnavailable as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    data = result.to_dict(project=project)
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        _print_results(data)
