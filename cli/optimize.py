"""``mem optimize``: compress files (or stdin) for an LLM prompt, locally, with the service's optimizer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cli.app import mem

_TYPES = ("auto", "json", "log", "diff", "code", "text")


@mem.command()
@click.option("--type", "content_type", type=click.Choice(_TYPES), default="auto", show_default=True,
              help="Content type; auto detects it per input.")
@click.option("--file", "-f", "files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Input file (repeatable); stdin when none is given.")
@click.option("--query", "-q", default=None, help="What the context is for (keeps matching JSON items).")
@click.option("--budget", "budget_tokens", type=click.IntRange(min=0), default=None,
              help="Token budget: inputs past it are left out (in order), originals kept in CCR.")
@click.option("--project", "-p", default=None, help="Project recorded with the CCR originals.")
@click.option("--json", "as_json", is_flag=True, help="Print per-chunk stats and totals as JSON.")
def optimize(content_type: str, files: tuple[Path, ...], query: str | None, budget_tokens: int | None,
             project: str | None, as_json: bool) -> None:
    """Print the optimized text of each input (or, with --json, the stats)."""
    from shared.config import get_settings
    from shared.optimizer.decode import decode_bytes
    from shared.optimizer.pipeline import InputChunk, InputTooLarge, optimize_chunks

    settings = get_settings()
    limit = settings.optimizer_max_input_bytes
    sources: list[tuple[str, bytes]] = []
    try:
        if files:
            for path in files:
                size = path.stat().st_size
                if size > limit:
                    raise click.ClickException(
                        f"{path} is {size} bytes, over the {limit}-byte limit (MEM_OPTIMIZER_MAX_INPUT_BYTES)")
                sources.append((str(path), path.read_bytes()))
        else:
            data = sys.stdin.buffer.read(limit + 1)
            if len(data) > limit:
                raise click.ClickException(f"stdin is over the {limit}-byte limit (MEM_OPTIMIZER_MAX_INPUT_BYTES)")
            sources.append(("-", data))
    except OSError as exc:
        raise click.ClickException(f"cannot read input: {exc}") from None

    chunks: list[InputChunk] = []
    notes: dict[str, str] = {}
    for name, data in sources:
        text, note = decode_bytes(data)
        if note:
            notes[name] = note
        chunks.append(InputChunk(text=text, id=name, content_type=content_type, project=project))
    try:
        result = optimize_chunks(chunks, query=query, budget_tokens=budget_tokens, settings=settings)
    except InputTooLarge as exc:
        raise click.ClickException(str(exc)) from None

    if as_json:
        payload = result.to_dict()
        for chunk in payload["chunks"]:
            if chunk["id"] in notes:
                chunk["decode_note"] = notes[chunk["id"]]
            del chunk["text"]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for optimized in result.chunks:
        if optimized.omitted:
            click.echo(f"[{optimized.id}: left out, over the token budget; CCR {optimized.ccr_hash}]", err=True)
            continue
        if len(result.chunks) > 1:
            click.echo(f"==> {optimized.id} <==")
        click.echo(optimized.text)
    totals = result.to_dict()["totals"]
    click.echo(f"tokens {totals['tokens_before']} -> {totals['tokens_after']} (ratio {totals['ratio']}, "
               f"{totals['tokenizer']})", err=True)
