"""Ingest throughput end to end through the real queue, beside raw embedding throughput of the same model.

Prints: documents, chunks, wall time, chunks/s end to end, raw embedding passages/s of the same chunk texts
in this process (same model, same batch size), their ratio, and the peak RSS of each worker pool.

    .venv/bin/python bench/ingest.py                       # ../shared/data/vaults/openshift-runbooks
    .venv/bin/python bench/ingest.py --broker redis        # Celery over Redis instead of PostgreSQL
    .venv/bin/python bench/ingest.py --vault DIR --limit 50

Not a test: it asserts nothing and takes minutes (embedding dominates).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_VAULT = REPO.parent / "shared" / "data" / "vaults" / "openshift-runbooks"


def _rss_tree(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0


def _max_rss_single(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        return max(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except (psutil.NoSuchProcess, ValueError):
        return 0


def _copy_vault(src: Path, dest: Path, limit: int | None) -> int:
    files = sorted(p for p in src.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(src).parts))
    if limit:
        files = files[:limit]
    for f in files:
        target = dest / f.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    return len(files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/mem-bench-ingest"))
    parser.add_argument("--broker", choices=["embedded", "redis"], default="embedded")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--limit", type=int, default=None, help="ingest only the first N markdown files")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    if not args.vault.is_dir():
        sys.exit(f"vault {args.vault} not found (the team kit's ../shared/data is absent?)")

    shutil.rmtree(args.data_dir, ignore_errors=True)
    args.data_dir.mkdir(parents=True)
    os.environ["MEM_DATA_DIR"] = str(args.data_dir)
    os.environ.setdefault("MEM_LOG_LEVEL", "WARNING")
    if args.broker == "redis":
        import redis

        redis.Redis.from_url(args.redis_url).flushdb()
        os.environ["MEM_REDIS_URL"] = args.redis_url

    from shared.config import get_settings
    from shared.db import embedded
    from shared.db.engine import get_engine, session_scope, upgrade_database
    from shared.jobs import store
    from shared.jobs.broker import dispatch

    settings = get_settings()
    source = args.data_dir / "source"
    n_files = _copy_vault(args.vault, source, args.limit)
    embedded.start(args.data_dir)
    upgrade_database(get_engine())

    mem = [sys.executable, "-m", "cli.main", "worker"]
    pools = {
        "embed": subprocess.Popen(mem + ["-Q", "embed", "-c", "1"], cwd=REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True),
        "io": subprocess.Popen(mem + ["-Q", "ingest,index", "-c", "1"], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True),
    }
    peak_tree = dict.fromkeys(pools, 0)
    peak_proc = dict.fromkeys(pools, 0)
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for name, proc in pools.items():
                peak_tree[name] = max(peak_tree[name], _rss_tree(proc.pid))
                peak_proc[name] = max(peak_proc[name], _max_rss_single(proc.pid))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        with session_scope() as session:
            job, _ = store.create_job(session, kind="ingest", first_step="ingest", project="bench",
                                      payload={"source": {"type": "directory", "path": str(source)}},
                                      submitted_by="bench")
            job_id = job.id
        started = time.perf_counter()
        dispatch("ingest", job_id)
        while True:
            with session_scope() as session:
                view = store.get_job(session, job_id)
            assert view is not None
            if view.status in store.FINISHED:
                break
            time.sleep(0.2)
        wall = time.perf_counter() - started
    finally:
        stop.set()
        sampler.join()
        for proc in pools.values():
            proc.terminate()
        for proc in pools.values():
            proc.wait(30)
    if view.status != "succeeded":
        sys.exit(f"ingest {view.status}: {view.error}")

    from sqlalchemy import select

    from shared.db.models import ChunkRow
    from shared.embedding import get_embedder
    from shared.ingest.pipeline import embed_input

    with session_scope() as session:
        texts = [embed_input(b, t) for b, t in session.execute(select(ChunkRow.breadcrumb, ChunkRow.text))]
    embedder = get_embedder(settings)
    assert embedder is not None
    embedder.embed(texts[:8])  # warm-up: session creation is not throughput
    raw_started = time.perf_counter()
    batch = settings.embed_batch_size
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    raw = time.perf_counter() - raw_started
    embedded.stop(args.data_dir)

    chunks = len(texts)
    result = {
        "vault": str(args.vault),
        "broker": args.broker,
        "documents": n_files,
        "chunks": chunks,
        "wall_s": round(wall, 2),
        "end_to_end_chunks_per_s": round(chunks / wall, 2),
        "raw_embed_passages_per_s": round(chunks / raw, 2),
        "ratio_end_to_end_vs_raw": round((chunks / wall) / (chunks / raw), 3),
        "peak_rss_mb": {name: round(v / 2**20, 1) for name, v in peak_tree.items()},
        "peak_rss_largest_process_mb": {name: round(v / 2**20, 1) for name, v in peak_proc.items()},
        "job_result": {k: view.result.get(k) for k in ("documents_seen", "chunks_written", "embedded", "skipped")},
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
