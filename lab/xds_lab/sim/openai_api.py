"""The OpenAI-compatible request and response shapes the simulator speaks (pure functions).

Only what clients and benchmarks use: prompt or messages, ``max_tokens`` (the simulator always
generates exactly that many tokens, like a benchmark run with ``ignore_eos``), ``stream`` and
``stream_options.include_usage``. ``usage.prompt_tokens_details.cached_tokens`` reports the
prefix-cache hit, as OpenAI's API does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xds_lab.sim.tokens import OUTPUT_WORDS, chat_tokens, text_tokens

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ParsedRequest",
    "completion_body",
    "error_body",
    "filler_text",
    "lenient_request",
    "parse_request",
    "stream_chunk",
]

DEFAULT_MAX_TOKENS = 128


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """What the engine needs from one request body."""

    tokens: list[str]
    max_tokens: int
    stream: bool
    include_usage: bool
    model: str


def parse_request(body: object, *, chat: bool, default_model: str) -> ParsedRequest:
    """Validate a completions or chat-completions body; raises ``ValueError`` with the reason."""
    if not isinstance(body, Mapping):
        raise ValueError("request body must be a JSON object")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("'messages' must be a non-empty list")
        tokens = chat_tokens(m for m in messages if isinstance(m, Mapping))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        tokens = text_tokens(prompt)
    if not tokens:
        raise ValueError("the prompt is empty")
    raw_max = body.get("max_completion_tokens", body.get("max_tokens", DEFAULT_MAX_TOKENS))
    if not isinstance(raw_max, int) or isinstance(raw_max, bool) or raw_max < 1:
        raise ValueError("'max_tokens' must be a positive integer")
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    model = body.get("model")
    return ParsedRequest(
        tokens=tokens,
        max_tokens=raw_max,
        stream=bool(body.get("stream", False)),
        include_usage=include_usage,
        model=model if isinstance(model, str) and model else default_model,
    )


def lenient_request(raw: bytes, *, default_model: str) -> ParsedRequest:
    """What a lenient server makes of a body that is not a completion request: its text is the
    prompt, everything else the defaults. Some OpenAI-compatible gateways serve such bodies;
    a profile with ``lenient_body`` does, so a test can tell "Envoy served it" from "the
    server refused it"."""
    text = raw.decode("utf-8", errors="replace")
    return ParsedRequest(
        tokens=text_tokens(text) or ["<empty>"],
        max_tokens=DEFAULT_MAX_TOKENS,
        stream=False,
        include_usage=False,
        model=default_model,
    )


def filler_text(start: int, count: int) -> str:
    """Output words ``start .. start + count``: deterministic, one word per token."""
    n = len(OUTPUT_WORDS)
    return "".join(f" {OUTPUT_WORDS[i % n]}" for i in range(start, start + count))


def _usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def completion_body(
    *,
    request_id: str,
    server: str,
    model: str,
    chat: bool,
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int,
    created: int,
) -> dict[str, Any]:
    """A non-streaming response body; ``server`` names the simulated server that answered."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": request_id,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "server": server,
        "choices": [choice],
        "usage": _usage(prompt_tokens, completion_tokens, cached_tokens),
    }


def stream_chunk(
    *,
    request_id: str,
    server: str,
    model: str,
    chat: bool,
    text: str | None,
    created: int,
    usage: tuple[int, int, int] | None = None,
) -> bytes:
    """One SSE ``data:`` event; ``text=None`` with ``usage`` is the final usage-only chunk."""
    choices: list[dict[str, Any]] = []
    if text is not None:
        choice: dict[str, Any] = {"index": 0, "finish_reason": None}
        if chat:
            choice["delta"] = {"content": text}
        else:
            choice["text"] = text
        choices.append(choice)
    chunk: dict[str, Any] = {
        "id": request_id,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": created,
        "model": model,
        "server": server,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = _usage(*usage)
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def error_body(*, message: str, kind: str, code: int) -> dict[str, Any]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": kind, "code": code}}
