"""The output tokens a completion response reports (OpenAI's ``usage.completion_tokens``),
read from its body as it passes in pieces: a server-sent-event stream (the usage rides in
the last ``data:`` event when the request asked ``stream_options.include_usage``) or one
JSON document. Pure; memory bounded (a stream keeps one partial line, a document up to
``MAX_DOCUMENT_BYTES``)."""

from __future__ import annotations

import json

__all__ = ["MAX_DOCUMENT_BYTES", "UsageReader"]

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""A JSON response longer than this is not read for its usage (its estimate stays charged)."""
_MAX_LINE_BYTES = 1024 * 1024


def _completion_tokens(document: bytes) -> int | None:
    try:
        parsed = json.loads(document)
    except ValueError:
        return None
    usage = parsed.get("usage") if isinstance(parsed, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return tokens
    return None


class UsageReader:
    """``feed`` the body's pieces in order; ``tokens`` is what the usage said (the last one
    seen), ``None`` while none has been."""

    def __init__(self) -> None:
        self.tokens: int | None = None
        self._stream: bool | None = None  # unknown until the first byte that is not space
        self._pending = b""
        self._ended = False

    def feed(self, piece: bytes, *, end: bool = False) -> None:
        """One piece of the body; ``end``: it is the last."""
        if self._ended:
            return
        if self._stream is None and (start := piece.lstrip()):
            self._stream = not start.startswith(b"{")
        if self._stream:
            self._lines(piece)
        elif len(self._pending) + len(piece) <= MAX_DOCUMENT_BYTES:
            self._pending += piece
        else:
            self._pending, self._ended = b"", True
            return
        if end:
            if not self._stream and self._pending:
                self.tokens = _completion_tokens(self._pending)
            self._pending, self._ended = b"", True

    def _lines(self, piece: bytes) -> None:
        lines = (self._pending + piece).split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > _MAX_LINE_BYTES:
            self._pending = b""  # no usage line is this long
        for line in lines:
            if line.startswith(b"data:") and b'"usage"' in line:
                tokens = _completion_tokens(line[5:].strip())
                if tokens is not None:
                    self.tokens = tokens
