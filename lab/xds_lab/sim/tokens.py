"""The simulator's tokenisation rule, shared with the load generator.

One token is one whitespace-separated word. A chat request adds one token per message for its
role marker (``<system>``, ``<user>``, ...), placed before the message's words, the way chat
templates put a role header before each turn. The rule is crude on purpose: it is cheap, and
because the load generator counts with the same rule, a prompt of N words costs N tokens of
prefill and a shared text prefix really hits the prefix cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "BLOCK_SIZE",
    "OUTPUT_WORDS",
    "ROLES",
    "block_hashes",
    "chat_tokens",
    "count_tokens",
    "text_tokens",
]

BLOCK_SIZE = 16
"""Tokens per KV-cache block (vLLM's default block size)."""

ROLES = ("system", "developer", "user", "assistant", "tool")
"""Chat roles the lab's tokenizer has a marker token for."""

OUTPUT_WORDS = ("the", "model", "answers", "with", "simulated", "tokens", "for", "this", "request")
"""What the simulator generates, one word per token, in turn."""


def text_tokens(text: str) -> list[str]:
    """Split a prompt into tokens: one per whitespace-separated word."""
    return text.split()


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under the simulator's rule."""
    return len(text.split())


def chat_tokens(messages: Iterable[Mapping[str, object]]) -> list[str]:
    """Tokens of a chat conversation: a role marker, then the words, for each message."""
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<{message.get('role', 'user')}>")
        content = message.get("content", "")
        if isinstance(content, str):
            tokens.extend(content.split())
        elif isinstance(content, list):
            # OpenAI content parts: only text parts carry tokens here.
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    tokens.extend(str(part["text"]).split())
    return tokens


def block_hashes(tokens: Sequence[str], *, block_size: int = BLOCK_SIZE) -> list[int]:
    """Chain hashes of the full blocks of ``tokens``.

    Block ``i``'s hash covers block ``i``'s tokens and the hash of block ``i - 1``, so two prompts
    share a hash only where they share the whole prefix up to that block (vLLM's scheme). The
    trailing partial block is never hashed: it cannot be reused.
    """
    hashes: list[int] = []
    parent = 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start : start + block_size])))
        hashes.append(parent)
    return hashes
