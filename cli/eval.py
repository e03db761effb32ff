"""``mem eval``: retrieval quality and latency on a BEIR folder or a markdown folder with qrels."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click

from cli.app import mem

TABLE_COLUMNS = ("ndcg@10", "mrr@10", "recall@10", "recall@50", "p@5", "p50_ms", "p95_ms")


def _table(title: str, rows: dict[str, dict[str, Any]]) -> str:
    width = max([len(title), *(len(name) for name in rows)])
    lines = [f"{title:<{width}}  " + "  ".join(f"{c:>9}" for c in TABLE_COLUMNS)]
    for name, values in rows.items():
        cells = []
        for column in TABLE_COLUMNS:
            value = values.get(column)
            cells.append(f"{value:>9.4f}" if isinstance(value, float) and not column.endswith("_ms")
                         else f"{value!s:>9}" if value is not None else f"{'-':>9}")
        lines.append(f"{name:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def _rebuild_lexical(settings: Any, log: Any) -> None:
    """Remove the Tantivy index directory and rebuild every project's lexical index from the database."""
    from sqlalchemy import select

    from shared.db.engine import session_scope
    from shared.db.models import Project
    from shared.evaluation.corpus import reindex_lexical
    from shared.search.lexical_factory import reset_lexical_indexes

    index_dir = settings.resolved_data_dir / "tantivy"
    log(f"removing {index_dir} and reindexing every project from the database")
    reset_lexical_indexes()
    shutil.rmtree(index_dir, ignore_errors=True)
    with session_scope() as session:
        names = list(session.scalars(select(Project.name).order_by(Project.name)))
    for name in names:
        log(f"  {name}: {reindex_lexical(name, settings)} chunks")


@mem.command("eval")
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="A BEIR folder, or a markdown folder with queries.jsonl and qrels.tsv at its top.")
@click.option("--split", default="test", show_default=True, help="BEIR qrels split (qrels/<split>.tsv).")
@click.option("--methods", default=",".join(("lexical", "semantic", "hybrid", "rrf", "auto")), show_default=True,
              help="Comma-separated: lexical, semantic, hybrid, rrf, auto.")
@click.option("--weights", "semantic_weight", type=click.FloatRange(0.0, 1.0), default=None,
              help="Semantic weight of linear fusion (lexical = 1 - it); default: the service default.")
@click.option("--sweep", is_flag=True, help="Also try semantic weights 0.0 .. 1.0 by 0.1 on this split.")
@click.option("--candidates", type=click.IntRange(1, 500), default=100, show_default=True,
              help="Candidates per engine (documents are ranked from up to twice this many chunks).")
@click.option("--max-queries", type=click.IntRange(1), default=None, help="Only the first N judged queries.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report as JSON to this file ('-' for stdout).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="Data directory (MEM_DATA_DIR).")
@click.option("--rebuild-lexical", is_flag=True,
              help="Delete the Tantivy index and rebuild it from the database (after a schema change).")
@click.option("--no-dedupe", is_flag=True, help="Keep near-identical chunks (the service collapses them).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def eval_command(dataset_dir: Path, split: str, methods: str, semantic_weight: float | None, sweep: bool,
                 candidates: int, max_queries: int | None, json_path: Path | None, data_dir: str | None,
                 rebuild_lexical: bool, no_dedupe: bool, quiet: bool) -> None:
    """Evaluate retrieval on DATASET: nDCG@10, MRR@10, Recall@10/50, P@5 and latency per method.

    Runs standalone: starts the embedded PostgreSQL in the data directory if needed, ingests the
    corpus through the normal pipeline once (cached by corpus hash), then runs every judged query.
    """
    from tqdm import tqdm

    from shared.config import get_settings
    from shared.db import embedded
    from shared.db.engine import get_engine, reset_engine, upgrade_database
    from shared.evaluation.corpus import ensure_ingested, evaluation_settings
    from shared.evaluation.datasets import DatasetError, load_dataset
    from shared.evaluation.runner import method_specs, run_method, sweep_weights
    from shared.search.lexical import LexicalUnavailable

    def log(message: str) -> None:
        click.echo(message, err=True)

    if data_dir:
        os.environ["MEM_DATA_DIR"] = str(Path(data_dir).expanduser().resolve())
    get_settings.cache_clear()
    settings = get_settings()
    try:
        specs = method_specs([m.strip() for m in methods.split(",") if m.strip()], semantic_weight)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--methods") from None
    try:
        dataset = load_dataset(dataset_dir, split)
    except DatasetError as exc:
        raise click.BadParameter(str(exc), param_hint="--dataset") from None
    if max_queries is not None:
        dataset.queries = dict(list(dataset.queries.items())[:max_queries])
    log(f"{dataset.name} ({dataset.kind}, split {dataset.split}): {len(dataset.queries)} queries, "
        f"{len(dataset.doc_paths)} documents; data directory {settings.resolved_data_dir}")

    started_db = False
    if settings.embedded_database:
        started_db = embedded.find_running(settings.resolved_data_dir) is None
        embedded.start(settings.resolved_data_dir)
    try:
        upgrade_database(get_engine())
        if rebuild_lexical:
            _rebuild_lexical(settings, log)
        try:
            project = ensure_ingested(dataset, settings, show_progress=not quiet, log=log)
        except LexicalUnavailable as exc:
            raise click.ClickException(
                f"{exc}\n(re-run with --rebuild-lexical to rebuild it from the database)"
            ) from None
        report: dict[str, Any] = {
            "dataset": dataset.name,
            "split": dataset.split,
            "project": project,
            "queries": len(dataset.queries),
            "candidates": candidates,
            "dedupe": not no_dedupe,
            "methods": {},
        }
        query_settings = evaluation_settings(settings, project)
        for spec in specs:
            bar = tqdm(total=len(dataset.queries), desc=spec.name, unit="q", file=sys.stderr, disable=quiet)
            try:
                report["methods"][spec.name] = run_method(
                    dataset, project, spec, query_settings, candidates=candidates, dedupe=not no_dedupe,
                    progress=bar.update,
                )
            finally:
                bar.close()
        if sweep:
            bar = tqdm(total=len(dataset.queries), desc="sweep", unit="q", file=sys.stderr, disable=quiet)
            try:
                report["sweep"] = sweep_weights(dataset, project, query_settings, candidates=candidates,
                                                progress=bar.update)
            finally:
                bar.close()
    finally:
        if started_db:
            reset_engine()
            embedded.stop(settings.resolved_data_dir)

    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    click.echo(_table(f"{dataset.name}/{dataset.split}", report["methods"]))
    if sweep:
        click.echo("")
        click.echo(_table("w_semantic", report["sweep"]))
    if json_path is not None:
        text = json.dumps(report, indent=2)
        if str(json_path) == "-":
            click.echo(text)
        else:
            json_path.write_text(text + "\n")
            log(f"report written to {json_path}")
