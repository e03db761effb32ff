"""Bytes to text for the optimizer: UTF-8, and line by line for files that mix encodings.

CI logs concatenate the output of many tools, so one file can hold UTF-8 lines next to Latin-1 or
cp1252 ones. Decoding the whole file with ``errors="replace"`` would turn the odd lines into U+FFFD;
decoding each line that is not UTF-8 as cp1252 (falling back to Latin-1, which maps every byte) keeps
them readable. Binary data is recognised by NUL bytes (more than a stray few) and left to the caller.
"""

from __future__ import annotations

import codecs


def decode_bytes(data: bytes) -> tuple[str, str | None]:
    """Decode ``data``; returns (text, note) where note says what was not plain UTF-8 (None when it was)."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    head = data[:8192]
    if head.count(b"\x00") > 0.01 * len(head):
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            try:
                return data.decode("utf-16"), "utf-16"
            except UnicodeDecodeError:
                pass
        # Latin-1 maps every byte, so the detector sees the NULs and passes the chunk through.
        return data.decode("latin-1"), "binary"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    lines: list[str] = []
    for raw in data.splitlines(keepends=True):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            try:
                lines.append(raw.decode("cp1252"))
            except UnicodeDecodeError:
                lines.append(raw.decode("latin-1"))
    return "".join(lines), "mixed_encoding"
