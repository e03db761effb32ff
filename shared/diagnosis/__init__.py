"""Failure diagnosis without a database: signatures of CI logs and symptom projection.

Public entry points: :func:`extract_signature`, :func:`detect_tool`, :func:`classify_line`,
:func:`project_symptom` and :data:`KNOWN_TOOLS`.
"""

from __future__ import annotations

from shared.diagnosis.classify import LineClass, UnknownToolError, classify, classify_line, resolve_tool
from shared.diagnosis.rules import KNOWN_TOOLS, TOOL_ALIASES
from shared.diagnosis.signature import ErrorLine, Signature, detect_tool, extract_signature, sig_sha
from shared.diagnosis.symptom import Symptom, project_symptom

__all__ = [
    "KNOWN_TOOLS",
    "TOOL_ALIASES",
    "ErrorLine",
    "LineClass",
    "Signature",
    "Symptom",
    "UnknownToolError",
    "classify",
    "classify_line",
    "detect_tool",
    "extract_signature",
    "project_symptom",
    "resolve_tool",
    "sig_sha",
]
