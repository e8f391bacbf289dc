"""The usage of a completion response, read from its body in pieces."""

from __future__ import annotations

import json

from xds_control.picker.usage import MAX_DOCUMENT_BYTES, UsageReader


def _sse(*events: object) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def test_a_stream_s_last_usage_event_is_read_across_pieces_cut_anywhere() -> None:
    body = _sse(
        {"choices": [{"delta": {"content": "hi"}}], "usage": None},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 17}},
    )
    for cut in range(1, len(body)):
        reader = UsageReader()
        reader.feed(body[:cut])
        reader.feed(body[cut:], end=True)
        assert reader.tokens == 17, cut


def test_a_stream_without_usage_says_none() -> None:
    reader = UsageReader()
    reader.feed(_sse({"choices": [{"delta": {"content": "hi"}}]}), end=True)
    assert reader.tokens is None


def test_a_json_document_s_usage_is_read_at_its_end() -> None:
    body = json.dumps({"choices": [{"text": "x"}], "usage": {"completion_tokens": 5}}).encode()
    reader = UsageReader()
    reader.feed(body[:10])
    assert reader.tokens is None
    reader.feed(body[10:], end=True)
    assert reader.tokens == 5


def test_a_document_past_the_bound_or_broken_says_none() -> None:
    reader = UsageReader()
    reader.feed(b"{" + b" " * MAX_DOCUMENT_BYTES)
    reader.feed(b'"usage": {"completion_tokens": 5}}', end=True)
    assert reader.tokens is None
    broken = UsageReader()
    broken.feed(b'{"usage": {"completion_tokens": "5"}}', end=True)
    assert broken.tokens is None
