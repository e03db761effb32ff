"""What a compressor hands back, and how it says "leave this one alone"."""

from __future__ import annotations


class CannotCompress(Exception):
    """Raised by a compressor that cannot compress its input safely; the pipeline passes the chunk through.

    ``reason`` is a short machine-readable word (``invalid_json``, ``json_too_deep``, ...) reported per chunk.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
