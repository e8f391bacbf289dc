"""An OpenAI request body -> what the picker ranks it by: the key of the prefix a server's KV
cache may already hold, and the prompt's size in (approximate) tokens.

The prefix is the same notion as the listener's classifier (docs/routing.md): the system (or
developer) message when there is one, else the prompt's first ``prefix_bytes`` bytes; two
requests with the same key share a prefix worth landing on the same server. Tokens are
estimated as bytes / 4 (the usual rule for English text with BPE tokenizers): the picker only
compares servers with each other, so the rule's error cancels as long as it is the same for
every request. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

__all__ = ["BYTES_PER_TOKEN", "Prompt", "prefix_key", "read_prompt"]

BYTES_PER_TOKEN = 4


class Prompt(NamedTuple):
    """What one request asks of a server's prefill."""

    key: bytes
    """16-byte key of the prefix (system message, else the first ``prefix_bytes`` bytes)."""
    tokens: float
    """Approximate prompt tokens: the prefill it costs a server with nothing cached."""
    prefix_tokens: float
    """Approximate tokens of the keyed prefix: what a server holding it does not prefill."""


def _content_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
    return []


def _texts(doc: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """The prompt's texts and the system message's; ``None`` for no completion request."""
    prompt = doc.get("prompt")
    if isinstance(prompt, str):
        return [prompt], []
    if isinstance(prompt, list):
        return [p for p in prompt if isinstance(p, str)], []
    messages = doc.get("messages")
    if not isinstance(messages, list):
        return None
    texts: list[str] = []
    system: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        found = _content_texts(message.get("content"))
        texts += found
        if message.get("role") in ("system", "developer"):
            system += found
    return texts, system


def read_prompt(body: bytes, *, prefix_bytes: int) -> Prompt | None:
    """``body``'s prefix key and size, or ``None`` when it is not a JSON completion or chat
    request (such a request gets no pick)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    found = _texts(doc)
    if found is None:
        return None
    texts, system = found
    whole = sum(len(t.encode()) for t in texts)
    prefix = "".join(system).encode() or "".join(texts).encode()[:prefix_bytes]
    return Prompt(
        key=hashlib.blake2b(prefix, digest_size=16).digest(),
        tokens=whole / BYTES_PER_TOKEN,
        prefix_tokens=len(prefix) / BYTES_PER_TOKEN,
    )


def prefix_key(body: bytes, *, prefix_bytes: int) -> bytes | None:
    """``body``'s prefix key alone (``read_prompt``'s), ``None`` for no completion request."""
    prompt = read_prompt(body, prefix_bytes=prefix_bytes)
    return None if prompt is None else prompt.key
