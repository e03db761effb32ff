"""Benchmark of the context optimizer on real data: token reduction, speed and retention per type.

    python bench/optimizer.py [--data ../shared/data] [--limit N] [--types log,json,...] [--json]
                              [--no-meaning] [--baseline REV] [--text-links keep|dedupe|drop]
                              [--tokenizer cl100k_base|o200k_base|embedding] [--units] [--marker-keys]

Data (read-only, never copied into the project):
- log:  LogChunks failed Travis logs (retention: the labelled failure chunk's lines survive), CiDiff
        fail logs (retention: the ground-truth error lines survive) and the Treeherder Firefox logs
        (retention: the error lines Treeherder's parser extracts survive; logs over
        MEM_OPTIMIZER_MAX_INPUT_BYTES are skipped, as the service refuses them);
- json: Loghub structured CSVs turned into JSON arrays (retention: every key, the first and last rows
        and every row whose level is an error level survive);
- diff: this repository's own history, ``git log -p`` one commit at a time, plus ``git diff HEAD``,
        whole and with only the files that existed before each commit (retention: every changed line
        and hunk position survives; see ``diff_lines``), and real-world patch files (``--patches DIR``, by
        default pyenv's python-build patches when pyenv is installed: CPython backports as
        ``git format-patch`` mail and as plain ``diff -ru`` output; one per distinct set of changed lines);
- code: this repository's own Python source, with code compression switched on (retention: every
        import, def and class line survives);
- text: the OpenShift and Prometheus-operator runbooks and SciFact's relevant test abstracts, each
        without and with a query (the alert name's words; the claim) (retention: code lines, inline
        code, identifiers, numbers and error codes survive, see ``text_must_keep``; URLs reported
        apart), then the SciFact ranking check of ``bench/optimizer_meaning.py`` (``--no-meaning``).

``--units`` counts every input with cl100k_base, o200k_base and WordPiece instead of compressing it (how
the units differ per source, and what counting costs); ``--marker-keys`` prints what the CCR marker
costs with its hash in other key formats.

``--baseline REV`` times the text, code and diff compressors of git revision REV against the working
tree's, interleaved in this process on the same inputs, and prints the ratios.

"Reduction" is 1 - tokens_after / tokens_before in cl100k_base tokens (``--tokenizer`` counts in
o200k_base or the embedding model's WordPiece instead), for the whole pipeline (aligner ``[ctx: ...]``
line and the CCR marker included) and for the compressor alone: the median over inputs, and "all" = over the summed tokens of every input (big
inputs weigh more). "ms/10KB" is the compressor's time (detection excluded), and the pipeline's
(detection, token counting and the CCR put included), after a warm-up that loads magika.

"floor" is the share of the source's tokens in its must-keep items (for diffs: changed lines and hunk
headers; for text: code lines, inline code and identifiers), a bound no honest compressor goes below.

Retention is reported three ways: over all must-keep lines of a source ("lines"), averaged per input
("per input") and as the share of inputs that keep at least 99 % ("inputs>=99%"). For logs, "tail
baseline" is the retention (lines / per input) of the crudest alternative at the same size: the last
characters of the log, as many as the pipeline's output has. It shows how much of the retention is
choice, not volume. For JSON the "baseline" column is the median reduction of minifying alone
(``json.dumps`` without blanks): BPE bills indentation, so that share of a JSON saving needs no crushing.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import gzip
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from shared.config import Settings  # noqa: E402
from shared.diagnosis.lines import split_line  # noqa: E402
from shared.noise import normalise_text  # noqa: E402
from shared.optimizer.align import align_dynamic  # noqa: E402
from shared.optimizer.ccr import MemoryCCRStore  # noqa: E402
from shared.optimizer.compress_code import compress_code  # noqa: E402
from shared.optimizer.compress_diff import compress_diff  # noqa: E402
from shared.optimizer.compress_json import compress_json  # noqa: E402
from shared.optimizer.compress_log import compress_log  # noqa: E402
from shared.optimizer.compress_text import compress_text  # noqa: E402
from shared.optimizer.decode import decode_bytes  # noqa: E402
from shared.optimizer.detect import detect_content_type  # noqa: E402
from shared.optimizer.outcome import CannotCompress  # noqa: E402
from shared.optimizer.pipeline import InputChunk, optimize_chunks  # noqa: E402
from shared.optimizer.prompt import split_trailer  # noqa: E402
from shared.optimizer.tokens import DEFAULT_TOKENIZER, TOKENIZERS, token_counter  # noqa: E402

count_tokens = token_counter(DEFAULT_TOKENIZER)  # main() switches it to --tokenizer

_FOLD_SUFFIX = re.compile(r" \[×\d+\]$")
_ERROR_LEVELS = {"error", "fatal", "severe", "critical", "crit", "e", "f", "err", "alert", "emerg", "panic"}
_IDENTIFIER_SHAPE = re.compile(r"[\d_./:]|[a-z][A-Z]|^[A-Z]{2,}")  # still an identifier once trailing dots go
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-/:]*[\d_./:][\w.\-/:]*|\b[A-Z][a-z]+[A-Z]\w*|\b[A-Z]{2,}\d*\b|\b\d[\w.]*")


@dataclass
class Sample:
    """One input: its text, the forced type and the strings that must survive compression."""

    name: str
    text: str
    kind: str
    must_keep: list[str] = field(default_factory=list)
    checker: Callable[[str, list[str]], int] | None = None  # returns how many must_keep survived
    query: str | None = None
    urls: list[str] = field(default_factory=list)  # link targets and bare URLs (text), reported apart


@dataclass
class Row:
    kind: str
    source: str
    tokens_before: int = 0
    tokens_after: int = 0
    baseline_kept: int = 0
    baseline_per_input: list[float] = field(default_factory=list)
    minified_reductions: list[float] = field(default_factory=list)  # json: what minifying alone saves
    skipped: int = 0
    reductions: list[float] = field(default_factory=list)
    compressor_reductions: list[float] = field(default_factory=list)
    ms_per_10kb: list[float] = field(default_factory=list)
    pipeline_ms_per_10kb: list[float] = field(default_factory=list)
    kept: int = 0
    must: int = 0
    per_input: list[float] = field(default_factory=list)  # retention of each input with must-keep lines
    passthrough: dict[str, int] = field(default_factory=dict)
    detected_as: dict[str, int] = field(default_factory=dict)
    urls_kept: int = 0
    urls: int = 0
    must_tokens: int = 0  # tokens of the must-keep items: what no compressor may go below


# --- retention checks ---------------------------------------------------------------------------


def _line_key(line: str) -> str:
    text, _ = split_line(line)
    return " ".join(normalise_text(_FOLD_SUFFIX.sub("", text)).split())


def _meaningful(line: str) -> bool:
    """A must-keep line worth checking: not blank once a bare timestamp (a GitHub blank line) is gone."""
    return len(_line_key(line).replace("<ts>", "").strip()) >= 3


def contained_lines(output: str, must_keep: list[str]) -> int:
    """Must-keep log lines found (normalised, whitespace-collapsed) inside the normalised output."""
    haystack = "\n".join(_line_key(line) for line in output.split("\n"))
    return sum(1 for line in must_keep if _line_key(line) in haystack)


def exact_lines(output: str, must_keep: list[str]) -> int:
    present = set(output.split("\n"))
    return sum(1 for line in must_keep if line in present)


def diff_lines(output: str, must_keep: list[str]) -> int:
    """Changed lines and hunk positions that survive. A hunk header counts by its ``@@ -a,b +c,d @@``
    part (a section name repeated from the hunk before is dropped on purpose); an added line folded
    into ``+… N lines moved from F`` counts when its removed twin is in the output."""
    present = set(output.split("\n"))
    hunks = {line.split(" @@", 1)[0] for line in present if line.startswith("@@ ")}
    moved = "lines moved from " in output
    removed = {line[1:].strip() for line in present if line.startswith("-")} if moved else set()
    kept = 0
    for line in must_keep:
        if line.startswith("@@ "):
            kept += line.split(" @@", 1)[0] in hunks
        elif line in present or (moved and line.startswith("+") and line[1:].strip() in removed):
            kept += 1
    return kept


def substrings(output: str, must_keep: list[str]) -> int:
    return sum(1 for item in must_keep if item in output)


def json_items(output: str, must_keep: list[str]) -> int:
    """must_keep holds "key:<name>" and "row:<LineId>" entries."""
    body, _ = split_trailer(output)
    try:
        data = json.loads(body)
    except ValueError:
        return 0
    rows = [item for item in data if isinstance(item, dict)]
    keys = {key for row in rows for key in row} | {k for row in rows for k in row.get("_keys_not_shown", [])}
    ids = {str(row.get("LineId")) for row in rows}
    return sum(1 for item in must_keep if (item[4:] in keys if item.startswith("key:") else item[4:] in ids))


# --- datasets -----------------------------------------------------------------------------------


def logchunks(data: Path, limit: int | None) -> Iterator[Sample]:
    root = data / "logs" / "logchunks"
    labels = root / "labels.jsonl"
    if not labels.exists():
        return
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    if limit is not None and limit < len(rows):
        rows = rows[:: -(-len(rows) // limit)]  # evenly spaced: every language, not the first N
    for row in rows:
        path = root / row["log"]
        if not path.exists():
            continue
        text, _ = decode_bytes(gzip.decompress(path.read_bytes()))
        text = text.replace("\r\n", "\n")
        chunk = row["chunk"].replace("\r\n", "\n")
        must = [ln for ln in chunk.split("\n") if _meaningful(ln)]
        yield Sample(f"logchunks/{row['log']}", text, "log", must, contained_lines)


def cidiff(data: Path, limit: int | None) -> Iterator[Sample]:
    root = data / "logs" / "cidiff"
    if not root.exists():
        return
    folders = sorted(p for p in root.iterdir() if (p / "groundtruth").exists())
    for folder in folders[:limit]:
        text, _ = decode_bytes((folder / "fail.log").read_bytes())
        lines = text.splitlines()
        must: list[str] = []
        for entry in (folder / "groundtruth").read_text().splitlines()[1:]:
            if not entry.startswith("E "):
                continue
            span = entry[2:].strip()
            first, _, last = span.partition("-")
            for number in range(int(first), int(last or first) + 1):
                if 0 < number <= len(lines) and _meaningful(lines[number - 1]):
                    must.append(lines[number - 1])
        yield Sample(f"cidiff/{folder.name}", text, "log", must, contained_lines)


def treeherder(data: Path, limit: int | None, max_bytes: int, skipped: list[str]) -> Iterator[Sample]:
    root = data / "logs" / "treeherder" / "tests" / "sample_data" / "logs"
    if not root.exists():
        return
    for expected in sorted(root.glob("*.logview.json"))[:limit]:
        path = root / expected.name.replace(".logview.json", ".log.gz")
        if not path.exists():
            continue
        raw = gzip.decompress(path.read_bytes())
        if len(raw) > max_bytes:
            skipped.append(path.name)
            continue
        text, _ = decode_bytes(raw)
        must = [e["line"] for e in json.loads(expected.read_text())["errors"] if _meaningful(e["line"])]
        yield Sample(f"treeherder/{path.name}", text, "log", must, contained_lines)


def loghub_json(data: Path, limit: int | None) -> Iterator[Sample]:
    root = data / "logs" / "loghub-2k"
    if not root.exists():
        return
    for path in sorted(root.glob("*/*_structured.csv"))[:limit]:
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            rows = list(csv.DictReader(handle))
        if not rows:
            continue
        must = [f"key:{key}" for key in rows[0]]
        must += [f"row:{rows[0]['LineId']}", f"row:{rows[-1]['LineId']}"]
        must += [f"row:{row['LineId']}" for row in rows if (row.get("Level") or "").strip().lower() in _ERROR_LEVELS]
        yield Sample(f"loghub/{path.parent.name}", json.dumps(rows, indent=2), "json", must, json_items)


_FILE_SECTION = re.compile(r"(?m)^(?=diff --git )")


def git_diffs(repo: Path, limit: int | None, *, modified_only: bool = False) -> Iterator[Sample]:
    """One sample per commit (``git show``) and ``git diff HEAD``; with ``modified_only`` only the
    sections of files that existed before the commit (no new, deleted or binary files)."""
    def run(*args: str) -> str:
        result = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace")
        return result.stdout if result.returncode == 0 else ""

    commits = run("log", "--format=%H", f"-n{limit or 200}").split()
    texts = [(f"commit {sha[:10]}", run("show", "--format=commit %H%n%n    %s%n", sha)) for sha in commits]
    texts.append(("git diff HEAD", run("diff", "HEAD")))
    for name, text in texts:
        if modified_only:
            sections = _FILE_SECTION.split(text)
            kept = [sec for sec in sections[1:] if "@@ " in sec
                    and not re.search(r"^(?:new|deleted) file mode", sec[:400], re.M)]
            text = "".join([sections[0], *kept]) if kept else ""
        if "@@ " not in text:
            continue
        yield Sample(name, text, "diff", hunk_lines(text), diff_lines)


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def hunk_lines(text: str) -> list[str]:
    """The hunk headers and changed lines of a unified diff, found by the hunks' own line counts: a
    format-patch ``-- `` signature or a ``---`` separator outside every hunk is no changed line.

    Written apart from ``compress_diff``'s own hunk walk on purpose: the benchmark's idea of what must
    survive must not share a bug with the compressor it judges."""
    must: list[str] = []
    old_left = new_left = 0
    for line in text.split("\n"):
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag == "+":
                new_left -= 1
                must.append(line)
            elif tag == "-":
                old_left -= 1
                must.append(line)
            elif tag in {" ", ""}:
                old_left -= 1
                new_left -= 1
            elif tag != "\\":
                old_left = new_left = 0
            continue
        match = _HUNK.match(line)
        if match:
            must.append(line)
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            new_left = int(match.group(2)) if match.group(2) is not None else 1
    return must



def default_patches() -> Path:
    """pyenv's python-build patches, the one collection of real-world patch files on a typical dev box."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    return root / "plugins" / "python-build" / "share" / "python-build" / "patches"


def patch_files(root: Path, limit: int | None) -> Iterator[Sample]:
    """Every ``*.patch`` / ``*.diff`` under ``root`` whose changed lines differ from those seen before
    (pyenv carries the same fix for many Python versions)."""
    if not root.is_dir():
        return
    seen: set[str] = set()
    count = 0
    for path in sorted(p for p in root.rglob("*") if p.suffix in {".patch", ".diff"} and p.is_file()):
        text = path.read_text(errors="replace")
        must = hunk_lines(text)
        key = hashlib.sha256("\n".join(line for line in must if not line.startswith("@@")).encode()).hexdigest()
        if not must or key in seen:
            continue
        seen.add(key)
        yield Sample(f"patch {path.relative_to(root)}", text, "diff", must, diff_lines)
        count += 1
        if limit is not None and count >= limit:
            return


def own_code(repo: Path, limit: int | None) -> Iterator[Sample]:
    files = sorted(p for folder in ("shared", "api", "cli", "workers", "bench") for p in (repo / folder).rglob("*.py"))
    for path in files[:limit]:
        text = path.read_text(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines()
        must = []
        # What the outline promises: module- and class-level imports, defs and classes (a def nested in a
        # function body goes with the body).
        pending: list[ast.stmt] = list(tree.body)
        while pending:
            node = pending.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom):
                must.append(lines[node.lineno - 1].strip())
            if isinstance(node, ast.ClassDef):
                pending.extend(node.body)
            elif isinstance(node, ast.If | ast.Try):
                pending.extend(node.body)  # TYPE_CHECKING and optional-import blocks
        if count_tokens(text) < 200:
            continue  # __init__ files and stubs: nothing to outline
        yield Sample(str(path.relative_to(repo)), text, "code", must, substrings)


_FENCED = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.S | re.M)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)  # within one paragraph: spans cross line ends
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# In prose a word in capitals (CPU, BACKGROUND) is a word; only E-codes (ENOENT) count as codes there.
_PLAIN_CAPITALS = re.compile(r"^(?!E[A-Z]{3,}$)[A-Z]+s?$|^[a-z]\.[a-z]$")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK_TARGET = re.compile(r"\]\((<[^>\n]*>|[^)\s]+)")
_BARE_URL = re.compile(r"(?:https?|ftp)://[^\s<>\])`]+")


def text_must_keep(text: str) -> tuple[list[str], list[str]]:
    """What prose compression must keep, and the URLs (reported apart, as link targets may go to CCR).

    Must keep: every non-blank line of every fenced code block, every inline code span, and every
    identifier, number and error code of the rest (URLs taken out first, so they do not count twice).
    A word in capitals only (CPU, BACKGROUND) is not an identifier in prose; ``ENOENT``-style codes are.
    HTML comments are left out: they are not part of what a reader of the document sees.
    """
    must: set[str] = set()
    for block in _FENCED.finditer(text):
        must.update(line for line in block.group(0).split("\n")[1:-1] if line.strip())
    rest = _HTML_COMMENT.sub(" ", _FENCED.sub(" ", text))  # a comment is not part of what a reader sees
    for paragraph in _PARAGRAPH_BREAK.split(rest):
        must.update(match.group(0) for match in _INLINE_CODE.finditer(paragraph))
    urls = {m.strip("<>") for m in _LINK_TARGET.findall(rest)} | {m.rstrip(".,:;") for m in _BARE_URL.findall(rest)}
    rest = _BARE_URL.sub(" ", _LINK_TARGET.sub("] ", _INLINE_CODE.sub(" ", rest)))
    found = {m.group(0).rstrip(".:/-") for m in _IDENTIFIER.finditer(rest)}
    must.update(token for token in found if _IDENTIFIER_SHAPE.search(token) and not _PLAIN_CAPITALS.match(token))
    return sorted(must), sorted(urls)


def _words_of_name(name: str) -> str:
    """``KubePodCrashLooping`` -> ``kube pod crash looping`` (as bench/alert_names.py builds its queries)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name).lower()


def scifact_pairs(data: Path, limit: int | None, *, with_query: bool) -> Iterator[Sample]:
    """The relevant abstracts of SciFact's test queries, compressed with or without the claim as query."""
    root = data / "beir" / "scifact"
    if not (root / "corpus.jsonl").exists():
        return
    qrels = [line.split() for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:] if line.strip()]
    qrels = qrels[:limit]
    wanted = {doc for _, doc, _ in qrels}
    docs: dict[str, str] = {}
    with (root / "corpus.jsonl").open() as handle:
        for line in handle:
            doc = json.loads(line)
            if doc["_id"] in wanted:
                docs[doc["_id"]] = f"{doc.get('title', '')}\n\n{doc.get('text', '')}"
    queries = {}
    with (root / "queries.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            queries[row["_id"]] = row["text"]
    for query_id, doc_id, _ in qrels:
        if doc_id not in docs:
            continue
        text = docs[doc_id]
        must, urls = text_must_keep(text)
        yield Sample(f"scifact/{query_id}/{doc_id}", text, "text", must, substrings,
                     query=queries[query_id] if with_query else None, urls=urls)


def runbooks(data: Path, limit: int | None, *, with_query: bool) -> Iterator[Sample]:
    """The runbooks; with ``with_query`` each is compressed for its alert name's words (the query
    bench/alert_names.py asks for it), as /memory/context and query+project mode always pass one."""
    files = sorted((data / "vaults").glob("*/**/*.md"))
    for path in files[:limit]:
        text = path.read_text(errors="replace")
        must, urls = text_must_keep(text)
        yield Sample(f"{path.parent.parent.name}/{path.name}", text, "text", must, substrings,
                     query=_words_of_name(path.stem) if with_query else None, urls=urls)


# --- running ------------------------------------------------------------------------------------

COMPRESSORS: dict[str, Callable[[str, str | None], str]] = {
    "log": lambda text, query: align_dynamic(compress_log(text)).text,
    "json": lambda text, query: compress_json(text),
    "diff": lambda text, query: compress_diff(text),
    "code": lambda text, query: compress_code(text, language="python"),
    "text": lambda text, query: compress_text(text, query=query),
}


def measure(sample: Sample, row: Row, settings: Settings, store: MemoryCCRStore) -> None:
    size_10kb = max(len(sample.text.encode("utf-8", "replace")) / 10240, 1e-9)
    started = time.perf_counter()
    try:
        compressed = COMPRESSORS[sample.kind](sample.text, sample.query)
    except CannotCompress:
        compressed = sample.text
    compressor_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    result = optimize_chunks([InputChunk(sample.text, id=sample.name)], query=sample.query, settings=settings,
                             store=store)
    pipeline_ms = (time.perf_counter() - started) * 1000
    chunk = result.chunks[0]
    row.detected_as[chunk.type] = row.detected_as.get(chunk.type, 0) + 1
    if chunk.reason:
        row.passthrough[chunk.reason] = row.passthrough.get(chunk.reason, 0) + 1
    before = chunk.tokens_before or 1
    row.tokens_before += chunk.tokens_before
    row.tokens_after += chunk.tokens_after
    row.reductions.append(1 - chunk.tokens_after / before)
    row.compressor_reductions.append(1 - count_tokens(compressed) / before)
    row.ms_per_10kb.append(compressor_ms / size_10kb)
    row.pipeline_ms_per_10kb.append(pipeline_ms / size_10kb)
    if sample.must_keep and sample.checker is not None:
        # Retention is judged on what the pipeline hands out (the original when it passed through).
        kept = sample.checker(chunk.text, sample.must_keep)
        row.must_tokens += count_tokens("\n".join(sample.must_keep))
        row.kept += kept
        row.must += len(sample.must_keep)
        row.per_input.append(kept / len(sample.must_keep))
        if sample.kind == "log":
            tail = sample.text[len(sample.text) - len(chunk.text):] if len(chunk.text) < len(sample.text) else sample.text
            baseline = sample.checker(tail, sample.must_keep)
            row.baseline_kept += baseline
            row.baseline_per_input.append(baseline / len(sample.must_keep))
    if sample.kind == "json":
        # Minifying alone: whitespace is billed by BPE (free in WordPiece), so part of any JSON saving is this.
        minified = json.dumps(json.loads(sample.text), ensure_ascii=False, separators=(",", ":"))
        row.minified_reductions.append(1 - count_tokens(minified) / before)
    if sample.urls:
        row.urls += len(sample.urls)
        row.urls_kept += sum(1 for url in sample.urls if url in chunk.text)


def _load_revision(module: str, revision: str, repo: Path) -> object:
    """The module ``shared.optimizer.<module>`` as it was at ``revision``, loaded beside today's."""
    import importlib.util

    source = subprocess.run(["git", "-C", str(repo), "show", f"{revision}:shared/optimizer/{module}.py"],
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader(f"baseline_{module}", loader=None)
    assert spec is not None
    loaded = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{revision}:{module}.py", "exec"), loaded.__dict__)  # noqa: S102 - our own history
    return loaded


def compare_speed(args: argparse.Namespace, kinds: set[str], settings: Settings) -> None:
    """Compressor ms per 10 KB, today's against ``--baseline``'s, interleaved on the same inputs."""
    del settings
    cases = [
        ("text", "compress_text", "runbooks", lambda: runbooks(args.data, args.limit, with_query=False), {}),
        ("text", "compress_text", "runbooks + query", lambda: runbooks(args.data, args.limit, with_query=True), {}),
        ("code", "compress_code", "own source (.py)", lambda: own_code(args.repo, args.limit),
         {"language": "python"}),
        ("diff", "compress_diff", "own git history", lambda: git_diffs(args.repo, args.limit), {}),
        ("diff", "compress_diff", "patch files", lambda: patch_files(args.patches, args.limit), {}),
    ]
    print(f"\nsame-process speed, {args.baseline} -> working tree (compressor ms per 10 KB, 3 rounds, best of each)")
    for kind, module, source, samples, extra in cases:
        if kind not in kinds:
            continue
        old = getattr(_load_revision(module, args.baseline, args.repo), module)
        new = {"compress_text": compress_text, "compress_code": compress_code, "compress_diff": compress_diff}[module]
        times: dict[str, list[float]] = {"old": [], "new": []}
        for sample in samples():
            size = max(len(sample.text.encode("utf-8", "replace")) / 10240, 1e-9)
            best = {"old": float("inf"), "new": float("inf")}
            for _ in range(3):
                for name, function in (("old", old), ("new", new)):
                    kwargs = dict(extra)
                    if kind == "text" and name == "new":
                        kwargs["query"] = sample.query
                    started = time.perf_counter()
                    with contextlib.suppress(CannotCompress):
                        function(sample.text, **kwargs)
                    best[name] = min(best[name], (time.perf_counter() - started) * 1000 / size)
            times["old"].append(best["old"])
            times["new"].append(best["new"])
        if not times["old"]:
            continue
        old_p50, new_p50 = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"{source:21} n={len(times['old']):>4}  p50 {old_p50:6.2f} -> {new_p50:6.2f} ({new_p50 / old_p50:.2f}x)  "
              f"p95 {_p95(times['old']):6.2f} -> {_p95(times['new']):6.2f}")


def compare_units(sources: list[tuple[str, str, Iterator[Sample]]], kinds: set[str]) -> None:
    """Every source's inputs counted by each tokenizer: total tokens, WordPiece tokens per cl100k token,
    characters per cl100k token and counting ms per 10 KB (median over inputs)."""
    counters = {name: token_counter(name) for name in TOKENIZERS}
    for counter in counters.values():
        counter("warm-up: load the vocabulary once")
    print(f"\n{'type':5} {'source':21} {'n':>4} " + " ".join(f"{name:>12}" for name in TOKENIZERS)
          + f" {'wp/cl100k':>9} {'chars/cl100k':>12}  ms/10KB p50 " + " / ".join(TOKENIZERS))
    for kind, source, samples in sources:
        if kind not in kinds:
            continue
        totals = dict.fromkeys(TOKENIZERS, 0)
        speed: dict[str, list[float]] = {name: [] for name in TOKENIZERS}
        chars = inputs = 0
        for sample in samples:
            size = max(len(sample.text.encode("utf-8", "replace")) / 10240, 1e-9)
            for name, counter in counters.items():
                started = time.perf_counter()
                totals[name] += counter(sample.text)
                speed[name].append((time.perf_counter() - started) * 1000 / size)
            chars += len(sample.text)
            inputs += 1
        if not inputs:
            continue
        print(f"{kind:5} {source:21} {inputs:>4} " + " ".join(f"{totals[name]:>12,}" for name in TOKENIZERS)
              + f" {totals['embedding'] / totals['cl100k_base']:>9.2f} {chars / totals['cl100k_base']:>12.2f}  "
              + " / ".join(f"{statistics.median(speed[name]):.2f}" for name in TOKENIZERS))


def marker_costs(keys: int = 300) -> None:
    """What a CCR marker costs with the same hash written in other key formats, per tokenizer."""
    import base64
    import hashlib
    import string

    def letters(value: int, count: int) -> str:
        out = []
        for _ in range(count):
            value, digit = divmod(value, 26)
            out.append(string.ascii_lowercase[digit])
        return "".join(out)

    formats: dict[str, Callable[[bytes], str]] = {
        "29 decimal digits (96 bits, now)": lambda d: str(int.from_bytes(d[:12], "big")).zfill(29),
        "24 hex (96 bits, before)": lambda d: d.hex()[:24],
        "16 hex (64 bits)": lambda d: d.hex()[:16],
        "64 hex (all 256 bits)": lambda d: d.hex(),
        "21 letters a-z (98 bits)": lambda d: letters(int.from_bytes(d[:13], "big"), 21),
        "20 base32, lowercase (100 bits)": lambda d: base64.b32encode(d).decode().lower()[:20],
        "16 base64url (96 bits)": lambda d: base64.urlsafe_b64encode(d).decode()[:16],
    }
    digests = [hashlib.sha256(f"original {i}".encode()).digest() for i in range(keys)]
    print(f"CCR marker cost over {keys} keys, mean (max) tokens; the frame '<!-- CCR: -->' alone: "
          + ", ".join(f"{name} {token_counter(name)('<!-- CCR: -->')}" for name in TOKENIZERS))
    print(f"{'key':34} " + " ".join(f"{name:>14}" for name in TOKENIZERS))
    for label, render in formats.items():
        cells = []
        for name in TOKENIZERS:
            costs = [token_counter(name)(f"<!-- CCR:{render(d)} -->") for d in digests]
            cells.append(f"{statistics.mean(costs):>8.1f} ({max(costs)})")
        print(f"{label:34} " + " ".join(f"{cell:>14}" for cell in cells))


def _p95(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--repo", type=Path, default=REPO, help="git repository for diffs and code")
    parser.add_argument("--patches", type=Path, default=default_patches(),
                        help="a folder of real-world *.patch / *.diff files (default: pyenv's python-build "
                        "patches, %(default)s; skipped when absent)")
    parser.add_argument("--limit", type=int, default=None, help="at most N inputs per source")
    parser.add_argument("--types", default="log,json,diff,code,text")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument("--no-meaning", action="store_true", help="skip the SciFact ranking check of text")
    parser.add_argument("--text-links", choices=("keep", "dedupe", "drop"), default=None,
                        help="link policy of the text compressor column (default: the compressor's own)")
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default=DEFAULT_TOKENIZER,
                        help="what counts the tokens (MEM_OPTIMIZER_TOKENIZER); default %(default)s")
    parser.add_argument("--units", action="store_true", help="instead of compressing, count every input with "
                        "each tokenizer and print totals, WordPiece per cl100k token and counting speed")
    parser.add_argument("--marker-keys", action="store_true",
                        help="print what the CCR marker costs in other key formats, per tokenizer, and stop")
    parser.add_argument("--baseline", metavar="REV", help="also time the text, code and diff compressors of git "
                        "revision REV in this process, on the same inputs, and print the speed ratios")
    args = parser.parse_args()

    if args.marker_keys:
        marker_costs()
        return
    kinds = set(args.types.split(","))
    global count_tokens
    count_tokens = token_counter(args.tokenizer)
    if args.text_links:
        COMPRESSORS["text"] = lambda text, query: compress_text(text, query=query, links=args.text_links)
    settings = Settings(compress_code=True, redis_url=None, optimizer_tokenizer=args.tokenizer)
    too_big: list[str] = []
    sources: list[tuple[str, str, Iterator[Sample]]] = [
        ("log", "LogChunks", logchunks(args.data, args.limit)),
        ("log", "CiDiff", cidiff(args.data, args.limit)),
        ("log", "Treeherder", treeherder(args.data, args.limit, settings.optimizer_max_input_bytes, too_big)),
        ("json", "Loghub CSV->JSON", loghub_json(args.data, args.limit)),
        ("diff", "own git history", git_diffs(args.repo, args.limit)),
        ("diff", "own history, modified", git_diffs(args.repo, args.limit, modified_only=True)),
        ("diff", "patch files", patch_files(args.patches, args.limit)),
        ("code", "own source (.py)", own_code(args.repo, args.limit)),
        ("text", "runbooks", runbooks(args.data, args.limit, with_query=False)),
        ("text", "runbooks + query", runbooks(args.data, args.limit, with_query=True)),
        ("text", "SciFact rel.", scifact_pairs(args.data, args.limit, with_query=False)),
        ("text", "SciFact rel.+claim", scifact_pairs(args.data, args.limit, with_query=True)),
    ]
    if args.units:
        compare_units(sources, kinds)
        return
    store = MemoryCCRStore(100_000, 3600)
    detect_content_type("warm-up: load magika once " * 40)  # the first load is not what we measure
    compress_log("a\nb\nERROR warm-up\nc\nd")

    rows: list[Row] = []
    for kind, source, samples in sources:
        if kind not in kinds:
            continue
        row = Row(kind, source)
        for sample in samples:
            measure(sample, row, settings, store)
        if row.reductions:
            rows.append(row)

    print(f"tokens: {args.tokenizer}")
    header = (f"{'type':5} {'source':21} {'n':>4} {'reduction':>9} {'all':>6} {'compressor':>10} "
              f"{'ms/10KB p50':>11} {'p95':>6} {'pipeline p95':>12} {'lines':>7} {'per input':>9} "
              f"{'inputs>=99%':>11} {'baseline':>15} {'URLs':>6} {'floor':>6}  detected / passthrough")
    print(header)
    print("-" * len(header))
    for row in rows:
        retention = f"{row.kept / row.must:.2%}" if row.must else "n/a"
        per_input = f"{statistics.mean(row.per_input):.2%}" if row.per_input else "n/a"
        whole = (f"{sum(1 for r in row.per_input if r >= 0.99) / len(row.per_input):.0%}"
                 if row.per_input else "n/a")
        baseline = (f"{row.baseline_kept / row.must:.1%} / {statistics.mean(row.baseline_per_input):.1%}"
                    if row.baseline_per_input else
                    f"minified {statistics.median(row.minified_reductions):.1%}" if row.minified_reductions else "n/a")
        overall = 1 - row.tokens_after / row.tokens_before if row.tokens_before else 0.0
        print(
            f"{row.kind:5} {row.source:21} {len(row.reductions):>4} {statistics.median(row.reductions):>9.1%} "
            f"{overall:>6.1%} {statistics.median(row.compressor_reductions):>10.1%} "
            f"{statistics.median(row.ms_per_10kb):>11.2f} {_p95(row.ms_per_10kb):>6.2f} "
            f"{_p95(row.pipeline_ms_per_10kb):>12.2f} {retention:>7} {per_input:>9} {whole:>11} {baseline:>15} "
            f"{(f'{row.urls_kept / row.urls:.0%}' if row.urls else 'n/a'):>6} "
            f"{(f'{row.must_tokens / row.tokens_before:.0%}' if row.tokens_before else 'n/a'):>6}  "
            f"{row.detected_as} {row.passthrough or ''}"
        )
    if too_big:
        print(f"skipped (over MEM_OPTIMIZER_MAX_INPUT_BYTES): {', '.join(too_big)}")
    if "text" in kinds and not args.no_meaning:
        import optimizer_meaning

        meaning = optimizer_meaning.run(args.data, args.limit, tokenizer=args.tokenizer)
        if meaning:
            print("\nmeaning check: SciFact test queries, each relevant abstract compressed and ranked "
                  "against the other abstracts (originals)")
            optimizer_meaning.print_rows(meaning)
    if args.baseline:
        compare_speed(args, kinds, settings)
    if args.json:
        print(json.dumps([row.__dict__ | {"retention": row.kept / row.must if row.must else None} for row in rows],
                         default=str))


if __name__ == "__main__":
    main()
