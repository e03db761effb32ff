"""The optimizer pipeline: detect, compress by type, align, keep the original under a CCR hash, count.

:func:`optimize_chunks` is pure apart from the CCR store it writes to: no HTTP, no broker. The API's
``POST /memory/optimize`` and the ``mem optimize`` command both call it.

A chunk is never lost and never made bigger: whatever cannot be compressed safely (binary, invalid
JSON, unbalanced code, a type switched off, a compressor that fails, output that is not smaller) is
passed through unchanged with a ``reason``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from shared.config import Settings, get_settings
from shared.optimizer.align import align_dynamic
from shared.optimizer.ccr import CCRStore, CCRUnavailable, ccr_hash, ccr_marker, get_ccr_store
from shared.optimizer.compress_code import compress_code
from shared.optimizer.compress_diff import compress_diff
from shared.optimizer.compress_json import compress_json
from shared.optimizer.compress_log import compress_log
from shared.optimizer.compress_text import compress_text
from shared.optimizer.detect import CONTENT_TYPES, Detection, detect_content_type
from shared.optimizer.outcome import CannotCompress
from shared.optimizer.tokens import DEFAULT_TOKENIZER, token_counter

log = logging.getLogger(__name__)

TYPE_CHOICES: tuple[str, ...] = ("auto", *CONTENT_TYPES)
# Types whose compressed text goes through the CacheAligner: run output. In JSON, diffs, code and prose
# a timestamp, a SHA or "5m" is content (a field's value, a changed line, a PromQL range), not noise.
ALIGNED_TYPES = frozenset({"log"})

_TOGGLES: dict[str, str] = {
    "json": "compress_json",
    "log": "compress_logs",
    "diff": "compress_diff",
    "code": "compress_code",
    "text": "compress_text",
}


_SURROGATE = re.compile("[\ud800-\udfff]")


class InputTooLarge(ValueError):
    """The input is over ``MEM_OPTIMIZER_MAX_INPUT_BYTES``; the API answers 413."""


@dataclass(frozen=True)
class InputChunk:
    """A piece of context to optimize. ``content_type`` forces the type (``auto`` lets the detector decide);
    ``project`` is recorded with the CCR original so retrieval gets the project's authorisation."""

    text: str
    id: str | None = None
    content_type: str = "auto"
    project: str | None = None


@dataclass
class OptimizedChunk:
    """One chunk after optimization, with what was done to it and what it cost."""

    id: str | None
    text: str
    type: str
    detector: str
    label: str
    tokens_before: int
    tokens_after: int
    ccr_hash: str | None
    ms: float
    reason: str | None = None  # why the chunk was passed through (or omitted), None when compressed
    omitted: bool = False  # left out to meet the token budget; the original is under ccr_hash

    @property
    def ratio(self) -> float:
        """tokens_after / tokens_before (1.0 = unchanged, 0.2 = a fifth of the tokens are left)."""
        return round(self.tokens_after / self.tokens_before, 4) if self.tokens_before else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the fields plus ``ratio``."""
        data = asdict(self)
        data["ratio"] = self.ratio
        data["ms"] = round(self.ms, 3)
        return data


@dataclass
class OptimizeResult:
    """The optimized chunks in input order, and totals over them."""

    chunks: list[OptimizedChunk] = field(default_factory=list)
    budget_tokens: int | None = None
    tokenizer: str = DEFAULT_TOKENIZER  # what counted tokens_before/after and the budget (MEM_OPTIMIZER_TOKENIZER)

    @property
    def tokens_before(self) -> int:
        """Tokens of all inputs."""
        return sum(chunk.tokens_before for chunk in self.chunks)

    @property
    def tokens_after(self) -> int:
        """Tokens of all outputs (omitted chunks count zero)."""
        return sum(chunk.tokens_after for chunk in self.chunks)

    @property
    def text(self) -> str:
        """The optimized chunks joined by blank lines (omitted ones left out)."""
        return "\n\n".join(chunk.text for chunk in self.chunks if not chunk.omitted)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"chunks": [...], "totals": {...}}``."""
        before, after = self.tokens_before, self.tokens_after
        return {
            "chunks": [chunk.to_dict() for chunk in self.chunks],
            "totals": {
                "chunks": len(self.chunks),
                "tokens_before": before,
                "tokens_after": after,
                "ratio": round(after / before, 4) if before else 1.0,
                "ms": round(sum(chunk.ms for chunk in self.chunks), 3),
                "omitted": sum(1 for chunk in self.chunks if chunk.omitted),
                "budget_tokens": self.budget_tokens,
                "tokenizer": self.tokenizer,
            },
        }


def _valid_unicode(text: str) -> tuple[str, str | None]:
    """Text that encodes to UTF-8: lone surrogates (from a JSON body or a bad decode) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text, None
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text), "invalid_unicode_replaced"


def _compressor(kind: str, detection: Detection, settings: Settings) -> Callable[[str, str | None], str]:
    if kind == "json":
        return lambda text, query: compress_json(
            text, query=query, parsed=detection.parsed_json, is_parsed=detection.json_parsed)
    if kind == "log":
        return lambda text, query: compress_log(text, query=query)
    if kind == "diff":
        return lambda text, query: compress_diff(text, query=query)
    if kind == "code":
        language = detection.label if detection.detector == "magika" else (
            "python" if detection.label == "python" else None)
        return lambda text, query: compress_code(text, query=query, language=language)
    select = settings.compress_text_select
    return lambda text, query: compress_text(text, query=query, select=select)


def _optimize_one(chunk: InputChunk, *, query: str | None, settings: Settings, store: CCRStore | None,
                  project: str | None, count_tokens: Callable[[str], int]) -> OptimizedChunk:
    started = time.perf_counter()
    text, unicode_note = _valid_unicode(chunk.text)
    tokens_before = count_tokens(text)

    def passthrough(kind: str, detector: str, label: str, reason: str) -> OptimizedChunk:
        return OptimizedChunk(chunk.id, text, kind, detector, label, tokens_before, tokens_before, None,
                              (time.perf_counter() - started) * 1000, reason)

    if settings.context_optimizer != "on":
        return passthrough("unknown", "none", "", "optimizer_off")
    if chunk.content_type != "auto":
        detection = Detection(chunk.content_type, "forced", chunk.content_type, 1.0)  # type: ignore[arg-type]
    else:
        detection = detect_content_type(text)
    kind = detection.type
    if kind == "binary":
        return passthrough(kind, detection.detector, detection.label, "binary")
    if kind == "config":
        return passthrough(kind, detection.detector, detection.label, "config_passthrough")
    if not getattr(settings, _TOGGLES[kind]):
        return passthrough(kind, detection.detector, detection.label, f"{_TOGGLES[kind]}_off")
    try:
        compressed = _compressor(kind, detection, settings)(text, query)
    except CannotCompress as exc:
        return passthrough(kind, detection.detector, detection.label, exc.reason)
    except Exception:  # a compressor bug must cost compression, never the request
        log.warning("compressor failed; passing the chunk through", exc_info=True,
                    extra={"chunk_id": chunk.id, "content_type": kind})
        return passthrough(kind, detection.detector, detection.label, "compressor_error")
    if kind in ALIGNED_TYPES:
        compressed = align_dynamic(compressed).text
    owner = chunk.project or project
    use_ccr = settings.ccr_enabled and store is not None
    hash_ = ccr_hash(text, owner) if use_ccr else None
    marked = f"{compressed}\n{ccr_marker(hash_)}" if hash_ else compressed
    tokens_after = count_tokens(marked)
    if tokens_after >= tokens_before:
        return passthrough(kind, detection.detector, detection.label, "no_gain")
    note = unicode_note
    if hash_ is not None and store is not None:
        try:
            store.put(text, project=owner)
            compressed = marked
        except CCRUnavailable:
            # Still smaller and still useful; only the way back to the original is missing.
            log.warning("CCR store unavailable; compressed chunk has no CCR marker", exc_info=True)
            note = note or "ccr_unavailable"
            hash_ = None
            tokens_after = count_tokens(compressed)
    return OptimizedChunk(chunk.id, compressed, kind, detection.detector, detection.label, tokens_before,
                          tokens_after, hash_, (time.perf_counter() - started) * 1000, note)


def _apply_budget(result: OptimizeResult, budget: int, *, settings: Settings, store: CCRStore | None,
                  chunks: Sequence[InputChunk], project: str | None) -> None:
    """Keep chunks in input order (callers rank them) while they fit; leave out the rest, originals in CCR."""
    used = 0
    for optimized, source in zip(result.chunks, chunks, strict=True):
        if used + optimized.tokens_after <= budget:
            used += optimized.tokens_after
            continue
        optimized.omitted = True
        optimized.reason = "over_budget"
        optimized.tokens_after = 0
        optimized.text = ""
        if optimized.ccr_hash is None and settings.ccr_enabled and store is not None:
            try:
                optimized.ccr_hash = store.put(_valid_unicode(source.text)[0], project=source.project or project)
            except CCRUnavailable:
                log.warning("CCR store unavailable; omitted chunk cannot be retrieved", exc_info=True)


def optimize_chunks(
    chunks: Sequence[InputChunk],
    *,
    query: str | None = None,
    budget_tokens: int | None = None,
    settings: Settings | None = None,
    store: CCRStore | None = None,
    project: str | None = None,
) -> OptimizeResult:
    """Optimize ``chunks`` for a prompt: each one detected, compressed by type, aligned and CCR-marked.

    ``query`` keeps matching JSON items and, for prose, the sentences that match it (with
    ``MEM_COMPRESS_TEXT_SELECT``); ``budget_tokens`` leaves out trailing chunks that do not fit (tokens
    are counted with ``MEM_OPTIMIZER_TOKENIZER``, cl100k_base by default);
    ``store`` defaults to :func:`get_ccr_store`; ``project`` is the default project of the CCR entries.
    Raises :class:`InputTooLarge` over ``MEM_OPTIMIZER_MAX_INPUT_BYTES`` and ``ValueError`` on a bad
    ``budget_tokens`` or content type.
    """
    settings = settings or get_settings()
    if budget_tokens is not None and budget_tokens < 0:
        raise ValueError("budget_tokens must be zero or more")
    for chunk in chunks:
        if chunk.content_type not in TYPE_CHOICES and chunk.content_type != "config":
            raise ValueError(f"unknown content type {chunk.content_type!r}; use one of {', '.join(TYPE_CHOICES)}")
    limit = settings.optimizer_max_input_bytes
    # len() is characters, a lower bound of the UTF-8 size: cheap rejection before encoding anything.
    total = 0
    for chunk in chunks:
        total += len(chunk.text) if len(chunk.text) > limit else len(chunk.text.encode("utf-8", "replace"))
        if total > limit:
            raise InputTooLarge(
                f"input is over {limit} bytes (MEM_OPTIMIZER_MAX_INPUT_BYTES); split it or raise the limit")
    if store is None and settings.ccr_enabled and settings.context_optimizer == "on":
        store = get_ccr_store(settings)
    count_tokens = token_counter(settings.optimizer_tokenizer)
    result = OptimizeResult(budget_tokens=budget_tokens, tokenizer=settings.optimizer_tokenizer)
    for chunk in chunks:
        result.chunks.append(_optimize_one(chunk, query=query, settings=settings, store=store, project=project,
                                           count_tokens=count_tokens))
    if budget_tokens is not None and result.tokens_after > budget_tokens:
        _apply_budget(result, budget_tokens, settings=settings, store=store, chunks=chunks, project=project)
    return result
