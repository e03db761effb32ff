"""One-time check that the optimizer's BPE counts are tiktoken's (bpe-openai against tiktoken).

    python bench/optimizer_tokens_check.py --tiktoken-site DIR [--data ../shared/data] [--limit N]

tiktoken is not a dependency of the project (it downloads its vocabulary at run time); install it in a
scratch environment with the same Python and point ``--tiktoken-site`` at that environment's
site-packages, which is appended to ``sys.path`` (the project's own packages stay first):

    python3.11 -m venv /tmp/tiktoken-check && /tmp/tiktoken-check/bin/pip install tiktoken
    .venv/bin/python bench/optimizer_tokens_check.py --tiktoken-site /tmp/tiktoken-check/lib/python3.11/site-packages

What it checks, for cl100k_base and o200k_base:

1. The vocabulary file inside the bpe-openai wheel, decompressed, has the sha256 that tiktoken itself
   requires of the file it downloads (``expected_hash`` in ``tiktoken_ext/openai_public.py``).
2. tiktoken is built from that file with tiktoken's own definition of the encoding (pattern and special
   tokens from ``tiktoken_ext.openai_public``; only the download is replaced by the local file), so both
   libraries share the vocabulary and differ only in their code.
3. Token ids of ``encode_ordinary`` are equal on hand-written edge cases (whitespace runs, CRLF,
   contractions, digits, Unicode, special-token text, CCR markers) and on every input of
   ``bench/optimizer.py`` before and after compression, plus the SciFact and NFCorpus abstracts; and
   ``shared.optimizer.tokens.count_tokens``, which counts big texts in pieces, equals tiktoken's count of
   the whole text.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import importlib.resources
import inspect
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bpe_openai  # noqa: E402
import optimizer as bench  # noqa: E402

from shared.optimizer.ccr import ccr_hash, ccr_marker  # noqa: E402
from shared.optimizer.outcome import CannotCompress  # noqa: E402
from shared.optimizer.tokens import _pieces, count_tokens  # noqa: E402

# What tiktoken_ext/openai_public.py requires of the downloaded files (checked against its source below).
PUBLISHED_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

EDGE_CASES = [
    "", " ", "  ", "\n", "\n\n", "\r\n", "\r\n\r\n", "\t", " \t \n", "a  b", "a   \n  b", "trailing   ",
    "   leading", "x\n\n\n\ny", "tab\there", "hello world", "tiktoken is great!", "2 + 2 = 4",
    "1234567890 12 123 1234", "3.14159 -0.5 1e-9 0x1F 0b1010", "don't DON'T we'll I'M they've you're she'd",
    "It's Bob's", "HTTPServerError snake_case_name camelCaseName kebab-case-name",
    "src/shared/optimizer/tokens.py:42:7", "C:\\Users\\x\\AppData\\Local\\Temp\\tmp1234.txt",
    "https://example.test/a/b?c=1&d=%20#frag", "<!-- CCR:0123456789abcdef01234567 -->",
    "<|endoftext|> <|fim_prefix|> <|endofprompt|>", "[ctx: ts=<ts> ×3; sha=abc1234]", "… N lines [×12] […]",
    "café naïve résumé Ångström", "Ελληνικά και русский текст", "日本語のテキストと中文文本", "한국어 텍스트",
    "emoji 👍🏽 👨‍👩‍👧 🇫🇷", "combining e\u0301 a\u0308", "nbsp\u00a0here and\u3000ideographic space",
    "zero\u200bwidth", "bell\x07 esc\x1b[31mred\x1b[0m", "\u2028line sep\u2029para sep", "x" * 300,
    "a-" * 200, "==" * 100 + "\n" + "--" * 100, "    indented code\n        deeper\n", "}\n\n\n}\n",
    "foo.\n\nbar", "foo!\r\n\r\nbar", "word\u00a0\nnext", "a/b/c//d///e", "'s 't 're 'S", "1,234,567.89",
]


def _vocabulary(name: str) -> bytes:
    raw = importlib.resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz").read_bytes()
    return gzip.decompress(raw)


def _tiktoken_encoding(name: str, path: Path) -> object:
    """tiktoken's own definition of ``name``, with its download replaced by the local ``path``."""
    import tiktoken
    from tiktoken import load
    from tiktoken_ext import openai_public

    source = inspect.getsource(getattr(openai_public, name))
    published = re.search(r'expected_hash="([0-9a-f]{64})"', source)
    assert published and published.group(1) == PUBLISHED_SHA256[name], f"{name}: tiktoken's expected hash moved"

    def local(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert url.endswith(f"/{name}.tiktoken"), url
        return load.load_tiktoken_bpe(str(path), expected_hash=expected_hash)  # checks the sha256 again

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = local
    try:
        spec = getattr(openai_public, name)()
    finally:
        openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


def _corpus(data: Path, limit: int | None) -> Iterator[tuple[str, str]]:
    """Every input of bench/optimizer.py, before and after its compressor (CCR marker appended), and the
    BEIR abstracts."""
    sources: list[Iterator[bench.Sample]] = [
        bench.logchunks(data, limit), bench.cidiff(data, limit),
        bench.treeherder(data, limit, 8 * 1024 * 1024, []), bench.loghub_json(data, limit),
        bench.git_diffs(REPO, limit), bench.own_code(REPO, limit),
        bench.runbooks(data, limit, with_query=True), bench.scifact_pairs(data, limit, with_query=True),
    ]
    for samples in sources:
        for sample in samples:
            yield sample.name, sample.text
            with contextlib.suppress(CannotCompress):
                compressed = bench.COMPRESSORS[sample.kind](sample.text, sample.query)
                yield f"{sample.name} (compressed)", f"{compressed}\n{ccr_marker(ccr_hash(sample.text))}"
    for corpus in ("scifact", "nfcorpus"):
        path = data / "beir" / corpus / "corpus.jsonl"
        if not path.exists():
            continue
        with path.open() as handle:
            for number, line in enumerate(handle):
                if limit is not None and number >= limit:
                    break
                doc = json.loads(line)
                yield f"{corpus}/{doc['_id']}", f"{doc.get('title', '')}\n\n{doc.get('text', '')}"


def check(name: str, texts: Callable[[], Iterator[tuple[str, str]]], scratch: Path) -> bool:
    """Compare bpe-openai with tiktoken on ``texts``; print a summary line and the first differences."""
    vocabulary = _vocabulary(name)
    digest = hashlib.sha256(vocabulary).hexdigest()
    path = scratch / f"{name}.tiktoken"
    path.write_bytes(vocabulary)
    reference = _tiktoken_encoding(name, path)
    ours = bpe_openai.get_encoding(name)
    count = chars = tokens = id_diffs = count_diffs = pieced = 0
    started = time.perf_counter()
    for label, text in texts():
        expected = reference.encode_ordinary(text)  # type: ignore[attr-defined]
        # In the pieces count_tokens cuts a big text into (bpe-openai refuses 200,000 tokens at once).
        got = [token for piece in _pieces(text) for token in ours.encode_ordinary(piece)]
        if got != expected:
            id_diffs += 1
            if id_diffs <= 5:
                where = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
                             min(len(got), len(expected)))
                print(f"  ids differ: {label!r} at token {where}: "
                      f"{reference.decode(expected[max(0, where - 3):where + 3])!r}")  # type: ignore[attr-defined]
        pieced += len(text) > 8192
        if count_tokens(text, name) != len(expected):
            count_diffs += 1
            if count_diffs <= 5:
                print(f"  count differs: {label!r}: {count_tokens(text, name)} vs {len(expected)}")
        count += 1
        chars += len(text)
        tokens += len(expected)
    # A run of more than 32,768 characters with no word end is cut blind: the one place counts may move.
    blob = hashlib.sha256(b"blob").hexdigest() * 3000
    blind = count_tokens(blob, name) - len(reference.encode_ordinary(blob))  # type: ignore[attr-defined]
    ok = digest == PUBLISHED_SHA256[name] and id_diffs == 0 and count_diffs == 0
    print(f"{name}: vocabulary sha256 {digest[:16]}… {'= published' if digest == PUBLISHED_SHA256[name] else 'DIFFERS'}; "
          f"{count} texts, {chars / 1e6:.1f} M chars, {tokens / 1e6:.2f} M tokens ({pieced} counted in pieces): "
          f"{id_diffs} with other ids, {count_diffs} with another count ({time.perf_counter() - started:.0f} s); a {len(blob):,}-character hex "
          f"run without a word end counts {blind:+d} against the whole")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiktoken-site", type=Path, required=True, help="site-packages that holds tiktoken")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=None, help="at most N inputs per source")
    parser.add_argument("--encodings", default="cl100k_base,o200k_base")
    args = parser.parse_args()
    sys.path.append(str(args.tiktoken_site))
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # never cache or fetch: the local file is the only source

    def texts() -> Iterator[tuple[str, str]]:
        for number, text in enumerate(EDGE_CASES):
            yield f"edge case {number}", text
        # One text far over bpe-openai's limit of a call, so count_tokens must cut it at word ends.
        yield "2 MB of words", " ".join(f"word{i % 977} line\n" if i % 7 == 0 else f"w{i}" for i in range(300_000))
        yield from _corpus(args.data, args.limit)

    with tempfile.TemporaryDirectory() as scratch:
        results = [check(name, texts, Path(scratch)) for name in args.encodings.split(",")]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
