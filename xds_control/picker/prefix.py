"""An OpenAI request body -> what the picker ranks it by: the prompt's chain of block hashes
(what a server's prefix cache may hold of it), its template key, and its size in (approximate)
tokens.

**Blocks.** The prompt is rendered as one byte string, each chat message as its role then its
text, and cut into ``BLOCK_BYTES`` blocks; block ``i``'s hash covers every byte up to the end
of block ``i``. Two prompts share a block hash exactly where they share all bytes up to it, the
way an engine's prefix cache shares KV blocks (vLLM chains its block hashes the same way). A
conversation's next turn repeats the previous turns, so it shares their blocks; a customer's
system prompt is the first blocks of each of its requests. The trailing partial block is not
hashed: engines cache only full blocks.

**Key.** The system (or developer) message when there is one, else the prompt's first
``prefix_bytes`` bytes: the listener classifier's notion of a template (docs/routing.md). It
only breaks ties, spreading new templates over servers by weight.

**Tokens.** With the model's tokenizer (``tokenize``), the prompt's token ids as the engine
cuts them, and their count. Without one, tokens are estimated as bytes / 4 (the usual rule for
English text with BPE tokenizers): the picker only compares servers with each other, so the
rule's error cancels as long as it is the same for every request. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = [
    "BLOCK_BYTES",
    "BYTES_PER_TOKEN",
    "BlockKey",
    "Prompt",
    "TokenIds",
    "Tokenize",
    "Wanted",
    "chain_keys",
    "prefix_key",
    "read_prompt",
]

BYTES_PER_TOKEN = 4


class TokenIds(NamedTuple):
    """A prompt's token ids as the engine's tokenizer gives them: all, or the first ones."""

    ids: Sequence[int]
    share: float
    """The share of the prompt's text they cover, (0, 1]: 1 when they are all of them."""


BlockKey = int
"""A block's chained key (``chain_keys``)."""

Wanted = Callable[[Sequence[int]], bool]
"""The prompt's first token ids -> whether the ids after them can still change the pick."""


class Tokenize(Protocol):
    """A request body (parsed) -> its prompt's token ids, ``None`` where they cannot be known;
    with ``wanted``, encoding may stop once it says the rest cannot matter."""

    def __call__(
        self, doc: Mapping[str, Any], /, *, wanted: Wanted | None = None
    ) -> TokenIds | None: ...


def chain_keys(data: bytes, *, step: int, parent: BlockKey = 0) -> list[BlockKey]:
    """Chained keys of ``data``'s full ``step``-byte blocks, continuing from ``parent``'s key:
    block ``i``'s key covers every byte up to the end of block ``i``."""
    keys = []
    for start in range(0, len(data) - step + 1, step):
        parent = hash((parent, data[start : start + step]))
        keys.append(parent)
    return keys


BLOCK_BYTES = 128
"""Bytes per block of the prefix index: about 32 tokens, two of vLLM's 16-token blocks. Finer
finds shared prefixes more exactly; coarser hashes less per request (a 12 KiB prompt is 96
blocks, a few tens of microseconds)."""


class Prompt(NamedTuple):
    """What one request asks of a server's prefill."""

    key: bytes
    """16-byte key of the template (system message, else the first ``prefix_bytes`` bytes)."""
    blocks: tuple[BlockKey, ...]
    """Chained keys of the prompt's full ``BLOCK_BYTES`` blocks, first block first."""
    tokens: float
    """Prompt tokens: the prefill it costs a server with nothing cached (exact with ids)."""
    token_ids: Sequence[int] | None = None
    """The prompt's (first) token ids, as the engine's tokenizer gives them; ``None`` without
    one."""
    bytes_per_token: float = BYTES_PER_TOKEN
    """The prompt's text bytes per token: what one ``BLOCK_BYTES`` block holds in tokens."""
    model: str | None = None
    """The body's ``model``: the base model's name or a LoRA adapter's; ``None``: none."""


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


def _texts(doc: dict[str, Any]) -> tuple[bytes, list[str], list[str]] | None:
    """The rendered prompt, its texts and the system message's; ``None`` for no completion
    request."""
    prompt = doc.get("prompt")
    if isinstance(prompt, str):
        return prompt.encode(), [prompt], []
    if isinstance(prompt, list):
        parts = [p for p in prompt if isinstance(p, str)]
        return "".join(parts).encode(), parts, []
    messages = doc.get("messages")
    if not isinstance(messages, list):
        return None
    rendered: list[str] = []
    texts: list[str] = []
    system: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        found = _content_texts(message.get("content"))
        role = message.get("role")
        rendered += [f"\x00{role}\x00", *found]
        texts += found
        if role in ("system", "developer"):
            system += found
    return "".join(rendered).encode(), texts, system


def read_prompt(
    body: bytes,
    *,
    prefix_bytes: int,
    tokenize: Tokenize | None = None,
    wanted: Wanted | None = None,
) -> Prompt | None:
    """``body``'s blocks, key and size, or ``None`` when it is not a JSON completion or chat
    request (such a request gets no pick). ``tokenize`` gives a body's token ids, ``None``
    where it cannot, and stops where ``wanted`` says the rest cannot matter."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    found = _texts(doc)
    if found is None:
        return None
    rendered, texts, system = found
    template = "".join(system).encode() or "".join(texts).encode()[:prefix_bytes]
    size = sum(len(t.encode()) for t in texts)
    ids = tokenize(doc, wanted=wanted) if tokenize is not None else None
    tokens = size / BYTES_PER_TOKEN
    if ids is not None and ids.ids and ids.share > 0:
        tokens = len(ids.ids) / ids.share  # exact, or the part past the ids estimated
    return Prompt(
        key=hashlib.blake2b(template, digest_size=16).digest(),
        blocks=tuple(chain_keys(rendered, step=BLOCK_BYTES)),
        tokens=tokens,
        token_ids=None if ids is None else ids.ids,
        bytes_per_token=max(1.0, size) / max(1.0, tokens),
        model=model if isinstance(model := doc.get("model"), str) else None,
    )


def prefix_key(body: bytes, *, prefix_bytes: int) -> bytes | None:
    """``body``'s template key alone (``read_prompt``'s), ``None`` for no completion request."""
    prompt = read_prompt(body, prefix_bytes=prefix_bytes)
    return None if prompt is None else prompt.key
