"""Does compressed prose still mean what the original meant? A retrieval check on BEIR SciFact.

    python bench/optimizer_meaning.py [--data ../shared/data] [--limit N] [--split train|test] [--sweep]

For every test query (a scientific claim) each relevant abstract is compressed (without the query:
markup and telegraphic rewriting; with it: extractive selection too) and ranked against the other
5,183 *original* abstracts, by BM25 (in process: lowercase words, Snowball stems, k1 0.9, b 0.4,
corpus statistics of the originals) and by the service's embedding model (all-MiniLM-L6-v2 int8,
``shared.embedding.local``; corpus vectors are cached in ``/tmp``, never in the project). Reported:
nDCG@10 and the mean rank of the relevant abstracts, original vs compressed, the share of relevant
abstracts that rank no worse, and the mean cosine between each abstract and its compressed form.

Known bias: query-aware selection keeps the sentences that share words with the query, so BM25 (and
to a lesser degree the embedding) sees a shorter text denser in query words; a better rank is not
proof that nothing was lost. The cosine to the original is the query-independent part of the check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import Stemmer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from shared.optimizer.compress_text import compress_text  # noqa: E402
from shared.optimizer.outcome import CannotCompress  # noqa: E402
from shared.optimizer.tokens import DEFAULT_TOKENIZER, TOKENIZERS, token_counter  # noqa: E402

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(["a", "an", "the", "of", "to", "in", "on", "for", "with", "by", "at", "from", "as", "or", "and", "is", "are", "was", "were", "be", "been", "that", "this", "it", "its"])
K1, B = 0.9, 0.4


@dataclass
class MeaningRow:
    """One compression mode's result over the SciFact test queries."""

    mode: str
    pairs: int
    reduction: float
    ndcg_bm25: tuple[float, float]
    ndcg_embed: tuple[float, float]
    rank_bm25: tuple[float, float]
    rank_embed: tuple[float, float]
    no_worse_bm25: float
    no_worse_embed: float
    cosine: float


class BM25:
    """Okapi BM25 over a fixed corpus; a document can be scored with another text in its place."""

    def __init__(self, docs: list[str]) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self.tfs = [Counter(self.terms(doc)) for doc in docs]
        self.lengths = np.array([sum(tf.values()) for tf in self.tfs], dtype=np.float64)
        self.avgdl = float(self.lengths.mean())
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {term: math.log(1 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for index, tf in enumerate(self.tfs):
            for term, count in tf.items():
                self.postings.setdefault(term, []).append((index, count))

    def terms(self, text: str) -> list[str]:
        """Lowercase alphanumeric words without stop words, stemmed."""
        return self._stemmer.stemWords([w for w in _WORD.findall(text.lower()) if w not in _STOP])

    def _term_score(self, term: str, count: float, length: float) -> float:
        return self.idf.get(term, 0.0) * count * (K1 + 1) / (count + K1 * (1 - B + B * length / self.avgdl))

    def scores(self, query: str, replaced: dict[int, str]) -> np.ndarray:
        """Scores of every document for ``query``, with ``replaced`` documents scored on their new text."""
        scores = np.zeros(len(self.tfs))
        terms = set(self.terms(query))
        for term in terms:
            for index, count in self.postings.get(term, ()):
                if index not in replaced:
                    scores[index] += self._term_score(term, count, self.lengths[index])
        for index, text in replaced.items():
            tf = Counter(self.terms(text))
            length = sum(tf.values())
            scores[index] = sum(self._term_score(term, tf[term], length) for term in terms if term in tf)
        return scores


def _ndcg10(scores: np.ndarray, relevant: set[int]) -> float:
    top = np.argsort(-scores, kind="stable")[:10]
    dcg = sum(1 / math.log2(rank + 2) for rank, index in enumerate(top) if int(index) in relevant)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def _rank(scores: np.ndarray, index: int) -> int:
    return int((scores > scores[index]).sum()) + 1


def _embed_corpus(embedder: object, ids: list[str], docs: list[str], corpus_path: Path) -> np.ndarray:
    digest = hashlib.sha256(corpus_path.read_bytes()).hexdigest()[:16]
    cache = Path("/tmp") / f"poimen-bench-scifact-{digest}.npy"
    if cache.exists():
        vectors = np.load(cache)
        if vectors.shape[0] == len(docs):
            return vectors
    vectors = embedder.embed(docs)  # type: ignore[attr-defined]
    np.save(cache, vectors)
    return vectors


def load_scifact(data: Path, split: str = "test"
                 ) -> tuple[list[str], list[str], dict[str, str], dict[str, set[str]]] | None:
    """Corpus ids and texts (title, blank line, abstract), the split's queries and their relevant ids."""
    root = data / "beir" / "scifact"
    if not (root / "corpus.jsonl").exists():
        return None
    ids: list[str] = []
    docs: list[str] = []
    with (root / "corpus.jsonl").open() as handle:
        for line in handle:
            doc = json.loads(line)
            ids.append(doc["_id"])
            docs.append(f"{doc.get('title', '')}\n\n{doc.get('text', '')}")
    queries = {}
    with (root / "queries.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    qrels: dict[str, set[str]] = {}
    for line in (root / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and int(parts[2]) > 0:
            qrels.setdefault(parts[0], set()).add(parts[1])
    return ids, docs, queries, qrels


def run(data: Path, limit: int | None = None, modes: dict[str, Callable[[str, str], str]] | None = None,
        split: str = "test", tokenizer: str = DEFAULT_TOKENIZER) -> list[MeaningRow]:
    """Compress the relevant abstracts of SciFact's queries in each mode and compare the rankings
    (``split="train"`` to choose settings, ``"test"`` to report them); the reduction is counted in
    ``tokenizer`` tokens."""
    count_tokens = token_counter(tokenizer)
    loaded = load_scifact(data, split)
    if loaded is None:
        return []
    from shared.embedding.local import LocalOnnxEmbedder

    ids, docs, queries, qrels = loaded
    position = {doc_id: index for index, doc_id in enumerate(ids)}
    query_ids = sorted(qrels, key=int)[:limit]
    modes = modes or {
        "telegraphic (no query)": lambda text, query: compress_text(text),
        "selection (claim as query)": lambda text, query: compress_text(text, query=query),
    }
    bm25 = BM25(docs)
    embedder = LocalOnnxEmbedder()
    corpus_vectors = _embed_corpus(embedder, ids, docs, data / "beir" / "scifact" / "corpus.jsonl")
    query_vectors = embedder.embed([queries[q] for q in query_ids])
    base: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for number, query_id in enumerate(query_ids):
        base[query_id] = (bm25.scores(queries[query_id], {}), corpus_vectors @ query_vectors[number])

    rows: list[MeaningRow] = []
    for mode, compress in modes.items():
        ndcg = {"bm25": ([], []), "embed": ([], [])}
        ranks = {"bm25": ([], []), "embed": ([], [])}
        no_worse = {"bm25": 0, "embed": 0}
        before_tokens = after_tokens = 0
        cosines: list[float] = []
        pairs = 0
        for number, query_id in enumerate(query_ids):
            relevant = {position[d] for d in qrels[query_id] if d in position}
            compressed: dict[int, str] = {}
            for index in relevant:
                try:
                    compressed[index] = compress(docs[index], queries[query_id])
                except CannotCompress:
                    compressed[index] = docs[index]
                before_tokens += count_tokens(docs[index])
                after_tokens += count_tokens(compressed[index])
            vectors = embedder.embed(list(compressed.values()))
            bm25_before, embed_before = base[query_id]
            bm25_after = bm25.scores(queries[query_id], compressed)
            embed_after = embed_before.copy()
            for row, index in enumerate(compressed):
                embed_after[index] = float(vectors[row] @ query_vectors[number])
                cosines.append(float(vectors[row] @ corpus_vectors[index]))
            for name, before, after in (("bm25", bm25_before, bm25_after), ("embed", embed_before, embed_after)):
                ndcg[name][0].append(_ndcg10(before, relevant))
                ndcg[name][1].append(_ndcg10(after, relevant))
                for index in relevant:
                    rank_before, rank_after = _rank(before, index), _rank(after, index)
                    ranks[name][0].append(rank_before)
                    ranks[name][1].append(rank_after)
                    no_worse[name] += rank_after <= rank_before
            pairs += len(relevant)

        def pair_of(values: tuple[list[float], list[float]]) -> tuple[float, float]:
            return statistics.mean(values[0]), statistics.mean(values[1])

        rows.append(MeaningRow(
            mode, pairs, 1 - after_tokens / before_tokens, pair_of(ndcg["bm25"]), pair_of(ndcg["embed"]),
            pair_of(ranks["bm25"]), pair_of(ranks["embed"]), no_worse["bm25"] / pairs, no_worse["embed"] / pairs,
            statistics.mean(cosines)))
    return rows


def print_rows(rows: list[MeaningRow]) -> None:
    """The meaning table: reduction next to the ranking change."""
    header = (f"{'mode':28} {'pairs':>5} {'reduction':>9} {'nDCG@10 BM25':>15} {'nDCG@10 MiniLM':>15} "
              f"{'mean rank BM25':>15} {'mean rank MiniLM':>17} {'no worse BM25/MiniLM':>21} {'cos':>5}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row.mode:28} {row.pairs:>5} {row.reduction:>9.1%} "
              f"{row.ndcg_bm25[0]:>6.3f} -> {row.ndcg_bm25[1]:.3f} {row.ndcg_embed[0]:>6.3f} -> {row.ndcg_embed[1]:.3f} "
              f"{row.rank_bm25[0]:>6.1f} -> {row.rank_bm25[1]:<6.1f} {row.rank_embed[0]:>7.1f} -> {row.rank_embed[1]:<6.1f} "
              f"{row.no_worse_bm25:>10.0%} / {row.no_worse_embed:<8.0%} {row.cosine:>5.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=None, help="at most N queries")
    parser.add_argument("--split", choices=("train", "test"), default="test",
                        help="train to choose settings (the sweep below), test to report")
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default=DEFAULT_TOKENIZER,
                        help="what counts the reduction; default %(default)s")
    parser.add_argument("--sweep", action="store_true",
                        help="compare how many query words an unprotected sentence must share (1-4) and link policies")
    args = parser.parse_args()
    modes = None
    if args.sweep:
        modes = {"telegraphic (no query)": lambda text, query: compress_text(text)}
        for need in (1, 2, 3, 4):
            modes[f"selection, {need} query stems"] = (
                lambda text, query, need=need: compress_text(text, query=query, min_query_matches=need))
    rows = run(args.data, args.limit, modes, args.split, args.tokenizer)
    if not rows:
        print(f"no SciFact under {args.data}")
        return
    print(f"tokens: {args.tokenizer}")
    print_rows(rows)


if __name__ == "__main__":
    main()
