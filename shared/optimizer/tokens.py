"""Token counts with the embedding model's own tokenizer (all-MiniLM-L6-v2, WordPiece).

tiktoken's ``cl100k_base`` would download its vocabulary on first use, which this service never does at run
time, so counts come from the tokenizer file that ships with the package. Counts are therefore WordPiece
tokens: close to, not equal to, what a GPT-style model would bill.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "embedding" / "assets" / "minilm-l6-v2.tokenizer.json"
TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece (tokenizers)"

# The BERT pre-tokenizer splits on whitespace, so cutting the text at newlines gives the same total count;
# pieces of this size let ``encode_batch_fast`` spread a big text over the cores.
_PIECE_CHARS = 8192


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    # The shipped file truncates and pads to 128 for embedding; a count must see the whole text.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _pieces(text: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    while start < len(text):
        cut = text.find("\n", start + _PIECE_CHARS)
        if cut < 0:
            cut = len(text)
        pieces.append(text[start:cut])
        start = cut
    return pieces


def count_tokens(text: str) -> int:
    """How many tokens ``text`` has for the embedding model, without special tokens and without truncation."""
    if not text:
        return 0
    encodings = _tokenizer().encode_batch_fast(_pieces(text), add_special_tokens=False)
    return sum(len(encoding.ids) for encoding in encodings)
