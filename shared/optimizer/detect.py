"""Content-type detection: magika's model plus cheap structural heuristics.

Magika (its ONNX model ships in the wheel and runs offline) is good at telling code, JSON, YAML and prose
apart, but has no "log" label: build logs come back as txt, csv, ini or yaml. So the certain structural
checks run first (JSON that parses, diff headers, a majority of log-shaped lines), magika decides the rest
when it is confident (score >= 0.7), and the heuristics decide below that or for tiny inputs, where
magika costs more than the heuristic.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Literal

from shared.diagnosis.lines import split_line

log = logging.getLogger(__name__)

ContentType = Literal["json", "code", "diff", "config", "log", "text", "binary"]
CONTENT_TYPES: tuple[str, ...] = ("json", "code", "diff", "config", "log", "text")
DetectorName = Literal["heuristic", "magika", "forced"]

MAGIKA_MIN_SCORE = 0.7
# Shares of log-shaped lines: above the first the text is a log whatever magika says (it has no "log"
# label); above the second it is a log when magika is unsure or calls it prose.
LOG_SHARE_CERTAIN = 0.3
LOG_SHARE_LIKELY = 0.15
# Below this many characters the heuristics are faster than a model call and about as good.
MAGIKA_MIN_CHARS = 256
# Magika reads the beginning and the end of its input; a bounded sample keeps big inputs cheap.
_MAGIKA_SAMPLE_CHARS = 16 * 1024
# Lines looked at by the line-shape heuristics (head and tail of the text).
_SAMPLE_LINES = 200
# JSON is parsed only below this size during detection; bigger JSON-looking input is judged by its shape.
_JSON_PARSE_MAX_CHARS = 16 * 1024 * 1024

_CONFIG_LABELS = frozenset(
    {"yaml", "toml", "ini", "hcl", "xml", "textproto", "gitattributes", "gitmodules", "ignorefile",
     "htaccess", "csproj", "vcxproj", "csv", "tsv", "dockerfile", "gemfile", "gemspec", "bazel", "cmake"}
)
_TEXT_LABELS = frozenset({"txt", "markdown", "rst", "latex", "eml", "srt", "vtt", "bib", "rtf", "sgml", "rdf"})
# Labels magika gives to logs: a log heuristic that fires at a low bar overrides these.
# (Not markdown: a runbook full of "$ oc get pods" lines is still a document.)
_LOG_LOOKALIKE_LABELS = frozenset({"txt", "csv", "tsv", "ini", "yaml", "jsonl", "shell", "eml"})

# A log line starts with a timestamp or carries a level word or a CI tool marker. These say "this is a
# log", nothing about what matters in it (that is the diagnosis rules' job, used by the log compressor).
_LOG_LINE = re.compile(
    r"""^(?:\s*\[?\d{4}-\d{2}-\d{2}[T\s]\d{2}:\d{2}     # ISO date and time
        |\s*\[?\d{2}:\d{2}:\d{2}                            # clock time
        |\s*[A-Z][a-z]{2}\s+\d{1,2}\s\d{2}:\d{2}:\d{2}      # syslog
        |\s*\d{6}\s\d{6}\s                                  # compact date time
        |.{0,40}?\b(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|CRITICAL|NOTICE|SEVERE)\b
        |\s*\[(?:info|warn|warning|error|debug|notice)\]
        |\s*(?:npm\s(?:ERR!|WARN)|\#\#\[\w+\]|::(?:error|warning|group)|travis_|\$\s|\+\s|==>\s|--->\s|Step\s\d+/\d+)
        |.*\b(?:PASSED|FAILED|PASS|FAIL|ok|not\sok)\b\s*(?:\(|\[|$)
    )""",
    re.VERBOSE,
)
# Lines only CI runners print: Travis folds, GitHub Actions groups and errors, GitLab sections, Jenkins
# pipeline steps. One of them anywhere near the top makes the text a log.
_CI_MARKERS = re.compile(
    r"^(?:travis_fold:start:|\S*##\[(?:group|error|section)\]|::group::|::error|section_start:\d+:|\[Pipeline\] )"
    r"|^Process completed with exit code \d+|^The command \".*\" exited with \d+\.",
    re.MULTILINE,
)
_CI_MARKER_SCAN_CHARS = 256 * 1024
_DIFF_GIT = re.compile(r"^diff --git ", re.MULTILINE)
_DIFF_UNIFIED = re.compile(r"^--- \S.*\n\+\+\+ \S.*\n@@ -\d", re.MULTILINE)
_PY_DECL = re.compile(r"^(?:def |class |import |from \S+ import |async def |@)", re.MULTILINE)
_BRACE_END = re.compile(r"[{};]\s*$")
_YAML_LINE = re.compile(r"^\s*(?:[\w.\-\"']+:\s|[\w.\-\"']+:$|- \S|-$|#|---$)")
_INI_LINE = re.compile(r"^\s*(?:\[[^\]]+\]|[\w.\-\"]+\s*=\s*\S|[#;])")


@dataclass(frozen=True)
class Detection:
    """What a piece of text is, who said so and how sure it was."""

    type: ContentType
    detector: DetectorName
    label: str  # magika's label or the heuristic that fired
    score: float
    parsed_json: Any = None  # the parsed value when detection already parsed JSON (saves a second parse)
    json_parsed: bool = False


_magika_lock = threading.Lock()
_magika_instance: Any = None
_magika_failed = False


def _magika() -> Any:
    """The process-wide Magika instance, loaded on first use; None when it cannot load."""
    global _magika_instance, _magika_failed
    if _magika_instance is not None or _magika_failed:
        return _magika_instance
    with _magika_lock:
        if _magika_instance is None and not _magika_failed:
            try:
                from magika import Magika

                _magika_instance = Magika()
            except Exception:  # a broken model must not take the optimizer down: heuristics still work
                log.warning("magika unavailable; content detection falls back to heuristics", exc_info=True)
                _magika_failed = True
    return _magika_instance


def _sample_lines(text: str) -> list[str]:
    head = text[: 200 * _SAMPLE_LINES].splitlines()[:_SAMPLE_LINES]
    if len(text) <= 200 * _SAMPLE_LINES:
        return [line for line in head if line.strip()]
    tail = text[-200 * _SAMPLE_LINES :].splitlines()[1:][-_SAMPLE_LINES:]
    return [line for line in head + tail if line.strip()]


def looks_binary(text: str) -> bool:
    """True when the text is mostly not text: NUL bytes, control characters or decoding replacements
    (a CI log with a few stray NULs from a crashed process is still a log)."""
    sample = text[:8192]
    if not sample:
        return False
    odd = sum(1 for ch in sample if (ch < " " and ch not in "\t\n\r\x1b\x0c") or ch == "\ufffd")
    return odd / len(sample) > 0.1 or sample.count("\x00") > 0.01 * len(sample)


def _is_log_line(raw: str) -> bool:
    if "\x1b[" in raw or "travis_" in raw:
        return True  # terminal colours and CI fold markers: output of a program, not a document
    text, body = split_line(raw)
    if _LOG_LINE.match(raw) or (text is not raw and _LOG_LINE.match(text)):
        return True
    _, marker_tool = _log_markers().scan(text, body, None)
    return marker_tool is not None


def _log_markers() -> Any:
    # The diagnosis rule tables know what each CI tool prints when it runs (their "markers").
    from shared.diagnosis.classify import rule_index

    return rule_index("auto")


def log_line_share(lines: list[str]) -> float:
    """The share of non-blank lines that look like log lines: a timestamp, a level word, ANSI colours,
    or a CI tool's marker line from the diagnosis rule tables."""
    if not lines:
        return 0.0
    return sum(1 for line in lines if _is_log_line(line)) / len(lines)


def _looks_like_json(stripped: str) -> bool:
    return bool(stripped) and (stripped[0], stripped[-1]) in {("{", "}"), ("[", "]")}


def _try_parse_json(stripped: str) -> tuple[bool, Any]:
    if len(stripped) > _JSON_PARSE_MAX_CHARS:
        return False, None
    try:
        return True, json.loads(stripped)
    except (ValueError, RecursionError):
        return False, None


def _is_diff(text: str) -> bool:
    head = text[:65536]
    return bool(_DIFF_GIT.search(head) or _DIFF_UNIFIED.search(head))


def _code_heuristic(text: str, lines: list[str]) -> str | None:
    if len(_PY_DECL.findall(text[:65536])) >= 1 and len(text) < 2_000_000:
        try:
            ast.parse(text)
            return "python"
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    if lines and sum(1 for line in lines if _BRACE_END.search(line)) / len(lines) >= 0.3:
        return "brace"
    return None


def _config_heuristic(lines: list[str]) -> str | None:
    if len(lines) < 2:
        return None
    if sum(1 for line in lines if _YAML_LINE.match(line)) / len(lines) >= 0.8:
        return "yaml"
    if sum(1 for line in lines if _INI_LINE.match(line)) / len(lines) >= 0.8:
        return "ini"
    return None


def _type_for_label(label: str, group: str) -> ContentType | None:
    if label == "json":
        return "json"
    if label == "diff":
        return "diff"
    if label == "jsonl":
        return "log"
    if label in _CONFIG_LABELS:
        return "config"
    if label in _TEXT_LABELS:
        return "text"
    if group == "code":
        return "code"
    if group in {"archive", "image", "video", "audio", "executable", "font", "application", "document"}:
        return "binary"
    return None


def detect_content_type(text: str, *, use_magika: bool = True) -> Detection:
    """Decide whether ``text`` is json, code, diff, config, log, text (or binary, which is never compressed)."""
    stripped = text.strip()
    if not stripped:
        return Detection("text", "heuristic", "empty", 1.0)
    if looks_binary(text):
        return Detection("binary", "heuristic", "binary", 1.0)

    json_shaped = _looks_like_json(stripped)
    if json_shaped:
        ok, value = _try_parse_json(stripped)
        if ok:
            return Detection("json", "heuristic", "json-parses", 1.0, parsed_json=value, json_parsed=True)

    if _is_diff(text):
        return Detection("diff", "heuristic", "diff-headers", 1.0)

    lines = _sample_lines(text)
    log_share = log_line_share(lines)
    if not json_shaped and (log_share >= LOG_SHARE_CERTAIN or _CI_MARKERS.search(text[:_CI_MARKER_SCAN_CHARS])):
        return Detection("log", "heuristic", "log-lines", round(log_share, 3))

    if use_magika and len(stripped) >= MAGIKA_MIN_CHARS:
        magika = _magika()
        if magika is not None:
            sample = text[:_MAGIKA_SAMPLE_CHARS] if len(text) <= 2 * _MAGIKA_SAMPLE_CHARS else (
                text[:_MAGIKA_SAMPLE_CHARS] + "\n" + text[-_MAGIKA_SAMPLE_CHARS:]
            )
            try:
                result = magika.identify_bytes(sample.encode("utf-8", "replace"))
                # The raw model label: magika's own output falls back to "txt" below its thresholds,
                # and the 0.7 bar is applied here instead.
                info = result.prediction.dl
                label, group, score = str(info.label), str(info.group), float(result.score)
            except Exception:  # detection must degrade, not fail
                log.warning("magika failed on a chunk; using heuristics", exc_info=True)
            else:
                mapped = _type_for_label(label, group)
                if label in _LOG_LOOKALIKE_LABELS and log_share >= LOG_SHARE_LIKELY:
                    return Detection("log", "magika", f"{label}+log-lines", round(score, 3))
                if mapped is not None and score >= MAGIKA_MIN_SCORE:
                    return Detection(mapped, "magika", label, round(score, 3))

    if json_shaped:
        # Looks like JSON and does not parse: the JSON compressor will pass it through with a reason.
        return Detection("json", "heuristic", "json-shaped", 0.5)
    code = _code_heuristic(text, lines)
    if code is not None:
        return Detection("code", "heuristic", code, 0.6)
    config = _config_heuristic(lines)
    if config is not None:
        return Detection("config", "heuristic", config, 0.6)
    if log_share >= LOG_SHARE_LIKELY:
        return Detection("log", "heuristic", "log-lines", round(log_share, 3))
    return Detection("text", "heuristic", "text", 0.5)
