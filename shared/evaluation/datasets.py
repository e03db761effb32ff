"""Evaluation datasets: a BEIR folder, or a folder of markdown files with ``queries.jsonl`` and ``qrels.tsv``.

Both become one :class:`Dataset`: queries, relevance judgements, and the corpus as markdown documents
(path -> text) so it is ingested through the same pipeline as a vault. A BEIR document becomes
``# title\\n\\ntext`` at ``<doc id>.md``; a markdown folder's documents are its files, and a document's
id is its path relative to the folder.

Readers stream the files line by line and reject malformed lines with the file and line number, so a
truncated download gives a clear error, not a stack trace.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BEIR_CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"
FOLDER_QRELS = "qrels.tsv"
MARKDOWN_SUFFIXES = (".md", ".markdown")
# Bumped when the BEIR -> markdown conversion changes, so cached ingests are not reused wrongly.
CONVERSION_VERSION = "1"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}$")


class DatasetError(ValueError):
    """The dataset folder is missing files or holds malformed lines; the message says where."""


@dataclass
class Dataset:
    """Queries, qrels and the corpus of one evaluation set (one split)."""

    name: str
    kind: str  # "beir" | "markdown"
    split: str
    root: Path
    queries: dict[str, str]  # query id -> text (only queries with judgements in the split)
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> relevance grade
    doc_paths: dict[str, str] = field(default_factory=dict)  # markdown path -> doc id
    corpus_sha: str = ""

    def documents(self) -> Iterator[tuple[str, str]]:
        """``(markdown path, markdown text)`` for every corpus document, read lazily."""
        if self.kind == "beir":
            yield from _beir_documents(self.root / BEIR_CORPUS)
        else:
            for path in self.doc_paths:
                yield path, (self.root / path).read_text(encoding="utf-8", errors="replace")


def detect_kind(root: Path) -> str:
    """``beir`` when ``root`` has ``corpus.jsonl``, ``markdown`` when it has ``qrels.tsv``; else an error."""
    if not root.is_dir():
        raise DatasetError(f"dataset folder {root} does not exist")
    if (root / BEIR_CORPUS).is_file():
        return "beir"
    if (root / FOLDER_QRELS).is_file():
        return "markdown"
    raise DatasetError(
        f"{root} is neither a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) "
        "nor a markdown folder (queries.jsonl and qrels.tsv at its top)"
    )


def load_dataset(root: Path, split: str = "test") -> Dataset:
    """Read the dataset in ``root`` for ``split`` (the split only matters for BEIR folders)."""
    root = root.expanduser().resolve()
    kind = detect_kind(root)
    if kind == "beir":
        qrels_file = root / "qrels" / f"{split}.tsv"
        if not qrels_file.is_file():
            have = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
            raise DatasetError(f"{root.name} has no qrels/{split}.tsv (splits: {', '.join(have) or 'none'})")
        qrels = read_qrels(qrels_file)
        doc_paths = beir_doc_ids(root)
        sha = _file_sha(root / BEIR_CORPUS)
    else:
        qrels = read_qrels(root / FOLDER_QRELS)
        doc_paths = {p: p for p in _markdown_files(root)}
        sha = _tree_sha(root, doc_paths)
    queries = read_queries(root / QUERIES)
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise DatasetError(f"{len(missing)} judged queries are not in {QUERIES} (first: {missing[0]!r})")
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    return Dataset(
        name=root.name,
        kind=kind,
        split=split if kind == "beir" else "all",
        root=root,
        queries=queries,
        qrels=qrels,
        doc_paths=doc_paths,
        corpus_sha=hashlib.sha256(f"{kind}\0{CONVERSION_VERSION}\0{sha}".encode()).hexdigest(),
    )


def read_queries(path: Path) -> dict[str, str]:
    """``{query id: text}`` from a BEIR-style ``queries.jsonl`` (``_id`` and ``text`` per line)."""
    if not path.is_file():
        raise DatasetError(f"missing {path.name} in {path.parent}")
    out: dict[str, str] = {}
    for number, record in _jsonl(path):
        qid, text = record.get("_id"), record.get("text")
        if not isinstance(qid, str | int) or not isinstance(text, str):
            raise DatasetError(f"{path.name} line {number}: needs string '_id' and 'text'")
        out[str(qid)] = text
    return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{query id: {doc id: grade}}`` from a TSV with a header (query-id, corpus-id, score)."""
    out: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as stream:
        reader = csv.reader(stream, delimiter="\t")
        for number, row in enumerate(reader, start=1):
            if not row or (number == 1 and row[0].strip().lower() in ("query-id", "query_id", "qid")):
                continue
            if len(row) < 3:
                raise DatasetError(f"{path.name} line {number}: expected query-id, corpus-id, score")
            try:
                grade = int(float(row[2]))
            except ValueError:
                raise DatasetError(f"{path.name} line {number}: score {row[2]!r} is not a number") from None
            if grade > 0:  # BEIR lists some zero grades; they are not relevant documents
                out.setdefault(row[0].strip(), {})[row[1].strip()] = grade
    if not out:
        raise DatasetError(f"{path.name} has no positive judgements")
    return out


def beir_path(doc_id: str) -> str:
    """The markdown path of a BEIR document: its id when that is a safe file name, else a hash of it."""
    if _SAFE_ID.fullmatch(doc_id):
        return f"{doc_id}.md"
    return f"id-{hashlib.sha256(doc_id.encode()).hexdigest()[:24]}.md"


def beir_markdown(title: str, text: str) -> str:
    """A BEIR document as markdown: its title as the H1 (whitespace collapsed), then its text."""
    title = " ".join(title.split())
    body = text.strip()
    return f"# {title}\n\n{body}\n" if title else f"{body}\n"


def beir_doc_ids(root: Path) -> dict[str, str]:
    """``{markdown path: BEIR doc id}`` for a BEIR corpus (a second pass; ids only)."""
    out: dict[str, str] = {}
    for number, record in _jsonl(root / BEIR_CORPUS):
        doc_id = record.get("_id")
        if not isinstance(doc_id, str | int):
            raise DatasetError(f"{BEIR_CORPUS} line {number}: needs an '_id'")
        out[beir_path(str(doc_id))] = str(doc_id)
    return out


def _beir_documents(path: Path) -> Iterator[tuple[str, str]]:
    for number, record in _jsonl(path):
        doc_id, title, text = record.get("_id"), record.get("title") or "", record.get("text") or ""
        if not isinstance(doc_id, str | int) or not isinstance(title, str) or not isinstance(text, str):
            raise DatasetError(f"{path.name} line {number}: needs '_id', and string 'title'/'text'")
        if not title.strip() and not text.strip():
            continue
        yield beir_path(str(doc_id)), beir_markdown(title, text)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    with path.open(encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path.name} line {number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path.name} line {number}: expected a JSON object")
            yield number, record


def _markdown_files(root: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and name.lower().endswith(MARKDOWN_SUFFIXES):
                out.append((Path(dirpath) / name).relative_to(root).as_posix())
    if not out:
        raise DatasetError(f"{root} holds no markdown files")
    return out


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _tree_sha(root: Path, paths: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(paths):
        digest.update(rel.encode() + b"\0" + _file_sha(root / rel).encode() + b"\0")
    return digest.hexdigest()
