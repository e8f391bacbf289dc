"""An OpenAI request body -> the key of the prefix a server's KV cache may already hold.

The same notion as the listener's classifier (docs/routing.md): the system (or developer)
message when there is one, else the prompt's first ``prefix_bytes`` bytes; two requests with
the same key share a prefix worth landing on the same server. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["prefix_key"]


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


def prefix_key(body: bytes, *, prefix_bytes: int) -> bytes | None:
    """A 16-byte key of ``body``'s prefix, or ``None`` when it is not a JSON completion or
    chat request (such a request gets no pick)."""
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
    text = "".join(system).encode() or "".join(texts).encode()[:prefix_bytes]
    return hashlib.blake2b(text, digest_size=16).digest()
