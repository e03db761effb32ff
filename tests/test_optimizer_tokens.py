"""Token counting: cl100k_base by default, the MEM_OPTIMIZER_TOKENIZER toggle, and counts equal to tiktoken's.

Where the expected ids come from:
- published examples: ``"hello world"`` -> [15339, 1917] (tiktoken's README example, cl100k_base),
  ``"tiktoken is great!"`` (OpenAI Cookbook, "How to count tokens with tiktoken", both encodings), and
  two sentences whose ids appear in public notebooks for gpt-4 (cl100k_base) and gpt-4o/gpt-4.1 (o200k_base);
- the other strings were encoded once with tiktoken 0.14.0 itself, built from the vocabulary file that
  bpe-openai ships (its sha256 is the one tiktoken requires of its download, checked below) and tiktoken's
  own pattern (``bench/optimizer_tokens_check.py``, which also compares every benchmark input).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
from typing import get_args

import pytest
from pydantic import ValidationError

from shared.config import Settings
from shared.optimizer import InputChunk, optimize_chunks
from shared.optimizer.ccr import MemoryCCRStore
from shared.optimizer.tokens import DEFAULT_TOKENIZER, TOKENIZERS, count_tokens, token_counter

PUBLISHED = {
    "cl100k_base": {
        "hello world": [15339, 1917],
        "tiktoken is great!": [83, 1609, 5963, 374, 2294, 0],
        "The Los Angeles Dodgers won the World Series in 2020.":
            [791, 9853, 12167, 56567, 2834, 279, 4435, 11378, 304, 220, 2366, 15, 13],
    },
    "o200k_base": {
        "tiktoken is great!": [83, 8251, 2488, 382, 2212, 0],
        "this is a test example, tutorialexample.com": [851, 382, 261, 1746, 4994, 11, 24000, 18582, 1136],
        "Hi my name is Betül and I like purple!": [12194, 922, 1308, 382, 10559, 13595, 326, 357, 1299, 37896, 0],
    },
}

# Encoded once with tiktoken (see the module docstring): CRLF and blank lines, a contraction, digit groups,
# an ellipsis, special-token text taken as text, non-Latin scripts, an emoji with a skin tone, tabs, trailing blanks.
VERIFIED = {
    "cl100k_base": {
        "Don't restart\r\n\r\n  the pod 12345 times…": [8161, 956, 17460, 881, 220, 279, 7661, 220, 4513, 1774, 3115, 1981],
        "<|endoftext|>": [27, 91, 8862, 728, 428, 91, 29],
        "naïve 日本語 👍🏽\t\tend  \n": [3458, 38672, 588, 76502, 22656, 45918, 252, 62904, 235, 9468, 237, 121, 197, 6379, 2355],
    },
    "o200k_base": {
        "Don't restart\r\n\r\n  the pod 12345 times…": [31559, 33437, 1414, 220, 290, 3155, 220, 7633, 2548, 4238, 1131],
        "<|endoftext|>": [27, 91, 419, 1440, 919, 91, 29],
        "naïve 日本語 👍🏽\t\tend  \n": [1503, 9954, 737, 17428, 40909, 160433, 52622, 121, 197, 13304, 4066],
    },
}

# What tiktoken_ext/openai_public.py requires of the vocabulary it downloads.
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


def _ids(encoding: str, text: str) -> list[int]:
    import bpe_openai

    return bpe_openai.get_encoding(encoding).encode_ordinary(text)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_the_shipped_vocabulary_is_the_one_tiktoken_downloads(encoding: str) -> None:
    packed = importlib.resources.files("bpe_openai.data").joinpath(f"{encoding}.tiktoken.gz").read_bytes()
    assert hashlib.sha256(gzip.decompress(packed)).hexdigest() == TIKTOKEN_SHA256[encoding]


@pytest.mark.parametrize(("encoding", "text", "expected"),
                         [(e, t, ids) for table in (PUBLISHED, VERIFIED) for e, cases in table.items()
                          for t, ids in cases.items()])
def test_token_ids_are_tiktokens(encoding: str, text: str, expected: list[int]) -> None:
    assert _ids(encoding, text) == expected
    assert count_tokens(text, encoding) == len(expected)


def test_default_is_cl100k_and_the_setting_offers_the_same_names() -> None:
    assert DEFAULT_TOKENIZER == "cl100k_base" == Settings().optimizer_tokenizer
    assert get_args(Settings.model_fields["optimizer_tokenizer"].annotation) == TOKENIZERS
    assert count_tokens("hello world") == 2


def test_embedding_counts_wordpiece_without_special_tokens() -> None:
    # WordPiece splits the hex run into many pieces and makes whitespace free; BPE bills the blanks.
    assert count_tokens("hello world", "embedding") == 2
    assert count_tokens("a" + " " * 40 + "b", "embedding") == 2
    assert count_tokens("a" + " " * 40 + "b", "cl100k_base") > 2
    assert count_tokens("", "embedding") == count_tokens("", "cl100k_base") == 0


def test_unknown_tokenizer_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="cl100k_base, o200k_base, embedding"):
        token_counter("gpt2")
    with pytest.raises(ValidationError, match="optimizer_tokenizer"):
        Settings(optimizer_tokenizer="gpt2")


def test_env_variable_selects_the_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEM_OPTIMIZER_TOKENIZER", "o200k_base")
    assert Settings().optimizer_tokenizer == "o200k_base"
    monkeypatch.setenv("MEM_OPTIMIZER_TOKENIZER", "wordpiece")
    with pytest.raises(ValidationError, match="'cl100k_base', 'o200k_base' or 'embedding'"):
        Settings()


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_pipeline_counts_and_names_the_configured_tokenizer(tokenizer: str) -> None:
    text = "The service is restarting.\n" + "\n".join(f"line {i} of the note that is long" for i in range(30))
    result = optimize_chunks([InputChunk(text)], settings=Settings(optimizer_tokenizer=tokenizer, redis_url=None),
                             store=MemoryCCRStore(10, 60))
    chunk = result.chunks[0]
    assert chunk.tokens_before == count_tokens(text, tokenizer)
    assert chunk.tokens_after == count_tokens(chunk.text, tokenizer)
    assert result.to_dict()["totals"]["tokenizer"] == tokenizer


def test_budget_is_in_the_configured_unit() -> None:
    # Blank runs are free in WordPiece and billed by BPE: the same budget fits under one and not the other.
    text = "word" + " " * 200 + "end"
    budget = count_tokens(text, "embedding")
    for tokenizer, omitted in (("embedding", False), ("cl100k_base", True)):
        settings = Settings(optimizer_tokenizer=tokenizer, redis_url=None)
        chunk = optimize_chunks([InputChunk(text, content_type="text")], settings=settings,
                                store=MemoryCCRStore(10, 60), budget_tokens=budget).chunks[0]
        assert chunk.omitted is omitted


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base"])
def test_big_texts_count_in_pieces_as_one_text(tokenizer: str) -> None:
    # Over bpe-openai's limits of one call (a million characters, 200,000 tokens): cut at word ends, the
    # pieces add up to exactly the count of the whole, which the same encoder gives for a part of it.
    words = " ".join(f"w{i}," if i % 11 else f"line{i}.\n\t" for i in range(260_000))
    assert len(words) > 1_000_000
    part = words[:200_000]  # within the limits, so bpe-openai can encode it in one call
    assert count_tokens(part, tokenizer) == len(_ids(tokenizer, part))
    cut = words.index(", w", 600_000) + 1  # a word ends at the comma, the next starts with the blank
    assert count_tokens(words, tokenizer) == count_tokens(words[:cut], tokenizer) + count_tokens(words[cut:], tokenizer)
