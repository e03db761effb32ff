"""Query latency at 10k and 100k chunks, and HNSW ef_search vs recall@10 against exact search.

    python bench/query.py [--data-dir /tmp/mem-bench] [--data ../shared/data] [--sizes 10000,100000]
                          [--queries 200] [--base 2000] [--ef 10,20,40,64,100,150,200,400]
                          [--real DATA_DIR] [--json FILE]

The corpus is synthesised, and this is what is real and what is not:

- texts: real passages, windows of 60 words (stride 15) over the BEIR SciFact and NFCorpus abstracts in
  ``--data`` (read only, never copied into the project); the lexical engine indexes these texts;
- vectors: ``--base`` of those passages are embedded for real with the service's embedder (once, cached
  in the data directory); every chunk gets one of them plus Gaussian noise (sigma 0.02 per dimension,
  cosine ~0.93 to its base), re-normalised. Vectors and texts of a chunk are not paired, so the two
  engines return different candidates, as they do on real data;
- queries: real BEIR queries, embedded at query time (query caches are emptied before each method, so
  every measured query pays for its embedding).

``--real`` measures ef_search against exact search on real vectors too (e.g. the data directory ``mem
eval`` filled with SciFact and NFCorpus): the synthetic corpus is made of tight clusters of near-identical
vectors, whose exact top 10 is decided by noise, so its recall figures are a pessimistic bound.

Chunks are written straight into the ``chunks`` table of a bench project (COPY), the HNSW index is built
after the load, and every size runs in its own embedded PostgreSQL (``<data-dir>/<size>``) so the index
holds exactly that many vectors. Runs are cached: a second run skips the load. Timings include
``run_query``'s whole path (routing, embedding, both engines in parallel, fusion, reading rows back).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

WINDOW_WORDS = 60
WINDOW_STRIDE = 15
NOISE_SIGMA = 0.02
CHUNKS_PER_DOCUMENT = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = (len(ordered) - 1) * q / 100
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def load_passages(data: Path, need: int) -> list[str]:
    """Up to ``need`` distinct word windows over the BEIR corpora (or made-up text without the data)."""
    out: list[str] = []
    for name in ("scifact", "nfcorpus"):
        corpus = data / "beir" / name / "corpus.jsonl"
        if not corpus.is_file():
            continue
        for record in read_jsonl(corpus):
            words = f"{record.get('title', '')} {record.get('text', '')}".split()
            for start in range(0, max(1, len(words) - WINDOW_WORDS + 1), WINDOW_STRIDE):
                out.append(" ".join(words[start : start + WINDOW_WORDS]))
                if len(out) >= need:
                    return out
    if len(out) < need:
        rng = random.Random(7)
        vocabulary = [f"term{i}" for i in range(20000)]
        log(f"only {len(out)} real passages under {data}; padding with made-up text")
        while len(out) < need:
            out.append(" ".join(rng.choice(vocabulary) for _ in range(WINDOW_WORDS)))
    return out


def load_queries(data: Path, count: int) -> list[str]:
    queries: list[str] = []
    for name in ("scifact", "nfcorpus"):
        path = data / "beir" / name / "queries.jsonl"
        if path.is_file():
            queries += [str(r["text"]) for r in read_jsonl(path) if len(str(r.get("text", "")).split()) >= 3]
    if not queries:
        queries = [f"question about term{i} and term{i * 7} in practice" for i in range(count)]
    random.Random(11).shuffle(queries)
    return queries[:count]


def embed_base(settings: Any, texts: list[str], cache_dir: Path) -> np.ndarray:
    from shared.embedding import get_embedder

    embedder = get_embedder(settings)
    digest = hashlib.sha256(("\0".join(texts) + embedder.model_id).encode()).hexdigest()[:16]
    cached = cache_dir / f"base-{digest}.npy"
    if cached.exists():
        return np.load(cached)
    log(f"embedding {len(texts)} base passages (once; cached in {cached})")
    started = time.monotonic()
    vectors = np.vstack([embedder.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    log(f"  {len(texts) / (time.monotonic() - started):.1f} passages/s")
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(cached, vectors)
    return vectors


def synth_vectors(base: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, base.shape[0], size=n)
    vectors = base[picks] + rng.normal(0.0, NOISE_SIGMA, size=(n, base.shape[1])).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def populate(size: int, settings: Any, base: np.ndarray, passages: list[str]) -> str:
    """Fill project ``bench-<size>`` with ``size`` chunks (skipped when already there)."""
    from sqlalchemy import func, select, text

    from shared.db.engine import get_engine, session_scope
    from shared.db.models import ChunkRow, Document, Project
    from shared.embedding import get_embedder
    from shared.search.lexical import LexicalDoc
    from shared.search.lexical_factory import get_lexical_index
    from shared.search.vector_store import ensure_vector_index, vector_index_name, vector_literal

    project = f"bench-{size}"
    embedder = get_embedder(settings)
    engine = get_engine()
    index = get_lexical_index(settings)
    with session_scope() as session:
        row = session.scalars(select(Project).where(Project.name == project)).first()
        have = 0
        if row is not None:
            have = session.scalar(select(func.count()).select_from(ChunkRow).where(ChunkRow.project_id == row.id))
    if have == size and index.count(project) == size:
        log(f"{project}: {size} chunks already loaded")
        return project
    log(f"{project}: loading {size} chunks")
    started = time.monotonic()
    with session_scope() as session:
        session.execute(text("DELETE FROM projects WHERE name = :p"), {"p": project})
        proj = Project(name=project)
        session.add(proj)
        session.flush()
        docs = [
            Document(project_id=proj.id, path=f"bench/doc-{d:06d}.md", content_sha="0" * 64, title=f"doc {d}")
            for d in range((size + CHUNKS_PER_DOCUMENT - 1) // CHUNKS_PER_DOCUMENT)
        ]
        session.add_all(docs)
        session.flush()
        doc_ids = [d.id for d in docs]
        project_id = proj.id
    # Building the graph once after the load is far faster than inserting into it row by row.
    with engine.connect() as conn:
        conn.execute(text(f"DROP INDEX IF EXISTS {vector_index_name(embedder.model_id, embedder.dim)}"))
        conn.commit()
    rng = np.random.default_rng(size)
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        columns = ("id, document_id, project_id, source, ordinal, level, breadcrumb, section_title, anchor, text, "
                   "token_count, start_line, end_line, text_sha, tags, embedding, model_id")
        for start in range(0, size, 10_000):
            count = min(10_000, size - start)
            vectors = synth_vectors(base, count, rng)
            with cur.copy(f"COPY chunks ({columns}) FROM STDIN") as copy:
                for offset in range(count):
                    i = start + offset
                    body = passages[i % len(passages)]
                    copy.write_row((
                        f"b{size}-{i}", doc_ids[i // CHUNKS_PER_DOCUMENT], project_id,
                        f"bench/doc-{i // CHUNKS_PER_DOCUMENT:06d}.md", i % CHUNKS_PER_DOCUMENT, 1,
                        f"bench > doc {i // CHUNKS_PER_DOCUMENT}", f"part {i % CHUNKS_PER_DOCUMENT}", "", body,
                        len(body.split()), 1, 1, hashlib.sha256(body.encode()).hexdigest(), "{}",
                        vector_literal(vectors[offset].tolist()), embedder.model_id,
                    ))
            raw.commit()
    finally:
        raw.close()
    log(f"  rows written in {time.monotonic() - started:.0f}s; building the HNSW index")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ALTER SYSTEM SET maintenance_work_mem = '1GB'"))
        conn.execute(text("SELECT pg_reload_conf()"))
    started = time.monotonic()
    ensure_vector_index(engine, embedder.model_id, embedder.dim)
    with engine.connect() as conn:
        conn.execute(text("ANALYZE chunks"))
        conn.commit()
    log(f"  index built in {time.monotonic() - started:.0f}s; indexing texts in tantivy")
    started = time.monotonic()
    index.delete_sources(project, [f"bench/doc-{d:06d}.md" for d in range(len(doc_ids))])
    batch: list[LexicalDoc] = []
    for i in range(size):
        batch.append(LexicalDoc(
            chunk_id=f"b{size}-{i}", project=project, source=f"bench/doc-{i // CHUNKS_PER_DOCUMENT:06d}.md",
            breadcrumb=f"bench > doc {i // CHUNKS_PER_DOCUMENT}", section=f"part {i % CHUNKS_PER_DOCUMENT}",
            content=passages[i % len(passages)], level=1,
        ))
        if len(batch) == 10_000:
            index.upsert(batch)
            batch = []
    if batch:
        index.upsert(batch)
    log(f"  lexical index written in {time.monotonic() - started:.0f}s")
    return project


def project_id(name: str) -> int:
    from sqlalchemy import select

    from shared.db.engine import session_scope
    from shared.db.models import Project

    with session_scope() as session:
        return int(session.scalar(select(Project.id).where(Project.name == name)))


def measure_ef(settings: Any, pid: list[int], query_vectors: np.ndarray, efs: list[int]) -> list[dict[str, Any]]:
    """recall@10 of HNSW at each ef_search against an exact scan, and the vector query's own latency."""
    from shared.db.engine import get_engine
    from shared.embedding import get_embedder
    from shared.search.vector_store import semantic_search

    engine = get_engine()
    model = get_embedder(settings).model_id
    exact = [
        {cid for cid, _ in semantic_search(engine, v.tolist(), model_id=model, project_ids=pid, limit=10, exact=True)}
        for v in query_vectors
    ]
    rows = []
    for ef in efs:
        recalls, latencies = [], []
        for vector, truth in zip(query_vectors, exact, strict=True):
            started = time.perf_counter()
            got = semantic_search(engine, vector.tolist(), model_id=model, project_ids=pid, limit=10, ef_search=ef)
            latencies.append((time.perf_counter() - started) * 1000)
            recalls.append(len(truth & {cid for cid, _ in got}) / max(1, len(truth)))
        rows.append({"ef_search": ef, "recall@10": round(statistics.mean(recalls), 4),
                     "p50_ms": round(percentile(latencies, 50), 2), "p95_ms": round(percentile(latencies, 95), 2)})
        log(f"  ef_search {ef:>4}: recall@10 {rows[-1]['recall@10']:.4f}  p50 {rows[-1]['p50_ms']:.2f} ms")
    return rows


def measure_methods(settings: Any, project: str, queries: list[str]) -> dict[str, dict[str, float]]:
    from shared.search.query import QueryRequest, forget_query_vectors, run_query

    out: dict[str, dict[str, float]] = {}
    for method in ("lexical", "semantic", "hybrid"):
        forget_query_vectors(settings)
        for text in queries[:5]:  # warm the engines and the model, with other queries
            run_query(QueryRequest(query=text + " warm", projects=[project], method=method), settings)
        totals, embeds, degraded = [], [], 0
        for text in queries:
            started = time.perf_counter()
            result = run_query(QueryRequest(query=text, projects=[project], method=method), settings)
            totals.append((time.perf_counter() - started) * 1000)
            embeds.append(result.metrics["embed_ms"] or 0.0)
            degraded += result.retrieval.method != method  # e.g. the embedder timed out under load
        out[method] = {
            "p50_ms": round(percentile(totals, 50), 2),
            "p95_ms": round(percentile(totals, 95), 2),
            "embed_p50_ms": round(percentile(embeds, 50), 2),
            "degraded": degraded,
        }
        log(f"  {method:<8} p50 {out[method]['p50_ms']:7.2f} ms  p95 {out[method]['p95_ms']:7.2f} ms  "
            f"(embedding p50 {out[method]['embed_p50_ms']:.2f} ms)")
    for q in ("p50_ms", "p95_ms"):
        out.setdefault("ratio", {})[q] = round(
            out["hybrid"][q] / (out["semantic"][q] + out["lexical"][q]), 3
        )
    log(f"  hybrid / (semantic + lexical): p50 {out['ratio']['p50_ms']}, p95 {out['ratio']['p95_ms']}")
    return out


def run_size(size: int, args: argparse.Namespace, passages: list[str], queries: list[str]) -> dict[str, Any]:
    os.environ["MEM_DATA_DIR"] = str(Path(args.data_dir).resolve() / str(size))
    from shared.config import get_settings
    from shared.db import embedded
    from shared.db.engine import get_engine, reset_engine, upgrade_database
    from shared.embedding import get_embedder
    from shared.search.lexical_factory import reset_lexical_indexes

    get_settings.cache_clear()
    reset_engine()
    reset_lexical_indexes()
    settings = get_settings()
    embedded.start(settings.resolved_data_dir)
    try:
        upgrade_database(get_engine())
        base = embed_base(settings, passages[: args.base], Path(args.data_dir).resolve())
        project = populate(size, settings, base, passages)
        embedder = get_embedder(settings)
        query_vectors = embedder.embed(queries[: args.recall_queries])
        log(f"{size} chunks: ef_search vs recall@10 over {len(query_vectors)} queries")
        ef_rows = measure_ef(settings, [project_id(project)], query_vectors, args.ef)
        log(f"{size} chunks: latency per method over {len(queries)} queries (ef_search {settings.hnsw_ef_search})")
        methods = measure_methods(settings, project, queries)
        return {"chunks": size, "ef_search": ef_rows, "methods": methods, "hnsw_ef_search": settings.hnsw_ef_search}
    finally:
        reset_engine()
        embedded.stop(settings.resolved_data_dir)


def run_real(args: argparse.Namespace, queries: list[str]) -> dict[str, Any]:
    """ef_search vs recall@10 on real embeddings: every embedded chunk of the data directory ``--real``
    (e.g. the one ``mem eval`` filled with SciFact and NFCorpus), with real queries."""
    os.environ["MEM_DATA_DIR"] = str(Path(args.real).resolve())
    from sqlalchemy import text

    from shared.config import get_settings
    from shared.db import embedded
    from shared.db.engine import get_engine, reset_engine
    from shared.embedding import get_embedder

    get_settings.cache_clear()
    reset_engine()
    settings = get_settings()
    started_here = embedded.find_running(settings.resolved_data_dir) is None
    embedded.start(settings.resolved_data_dir)
    try:
        embedder = get_embedder(settings)
        with get_engine().connect() as conn:
            rows = conn.execute(
                text("SELECT project_id, count(*) FROM chunks WHERE model_id = :m GROUP BY project_id"),
                {"m": embedder.model_id},
            ).all()
        pids = [int(r[0]) for r in rows]
        total = sum(int(r[1]) for r in rows)
        query_vectors = embedder.embed(queries[: args.recall_queries])
        log(f"real vectors ({total} chunks in {settings.resolved_data_dir}): ef_search vs recall@10")
        return {"chunks": total, "ef_search": measure_ef(settings, pids, query_vectors, args.ef)}
    finally:
        reset_engine()
        if started_here:
            embedded.stop(settings.resolved_data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="/tmp/mem-bench", help="bench data directory (one per size inside)")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="evaluation data (read only)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200, help="queries per method for latency")
    parser.add_argument("--recall-queries", type=int, default=100, help="queries for ef_search vs recall")
    parser.add_argument("--base", type=int, default=2000, help="passages embedded for real")
    parser.add_argument("--ef", default="10,20,40,64,100,150,200,400")
    parser.add_argument("--real", default=None,
                        help="also measure ef_search vs recall on the real vectors of this data directory")
    parser.add_argument("--json", default=None, help="write the numbers to this file")
    args = parser.parse_args()
    args.ef = [int(x) for x in args.ef.split(",")]
    os.environ.setdefault("MEM_LOG_LEVEL", "WARNING")
    sizes = [int(x) for x in args.sizes.split(",")]
    passages = load_passages(Path(args.data), max(sizes))
    queries = load_queries(Path(args.data), args.queries + 10)
    report = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "sizes": []}
    for size in sizes:
        report["sizes"].append(run_size(size, args, passages, queries[10:]))
    if args.real:
        report["real"] = run_real(args, queries[10:])
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
