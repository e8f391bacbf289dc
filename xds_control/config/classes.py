"""Request classes: what Envoy reads from a request's body, and how routes match on it.

A request class is a route whose match names what the body says (prompt length, stream,
``max_tokens``, keywords, model). A filter inside Envoy (``classify``, per listener) reads the
OpenAI-style JSON body and sets headers; the route's body conditions compile to matches on those
headers, so classes are tried in the routes' declared order, and a request the filter could not
read (too large, not JSON) matches none of them and takes the default route.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from xds_control.config.strict import StrictModel

__all__ = ["ENVOY_BUFFER_LIMIT", "Classify", "TokenRange"]

ENVOY_BUFFER_LIMIT = 1024 * 1024
"""Envoy's default per-connection buffer limit: a filter that buffers more answers 413."""

HeaderName = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64, description="A lower-case header name."),
]


class TokenRange(StrictModel):
    """A range of token counts, ``min`` inclusive, ``max`` exclusive (Envoy's range match)."""

    min: int = Field(default=0, ge=0, description="Smallest count that matches.")
    max: int | None = Field(
        default=None, ge=1, description="First count that no longer matches; unset: no bound."
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max is not None and self.max <= self.min:
            raise ValueError(f"max ({self.max}) must be above min ({self.min})")
        return self


class Classify(StrictModel):
    """The body-reading filter in front of a listener's router (Lua, run by Envoy).

    It sets each header only when the request does not carry it already, and reads no body at
    all when the client sent both the model and the prefix-hash header. Estimated prompt tokens
    are the prompt's UTF-8 bytes / 4 (rounded up): close to what BPE tokenizers give for English
    and code, and enough to tell a short chat from a long document."""

    max_body_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=ENVOY_BUFFER_LIMIT,
        description="Largest body read (by its content-length); a larger one, or one without a "
        "content-length (chunked), is not read and takes the default route. 64 KiB holds "
        "about 16k prompt tokens; at most Envoy's 1 MiB buffer limit, past which Envoy would "
        "answer 413 instead of serving.",
    )
    prefix_bytes: int = Field(
        default=256,
        ge=16,
        le=64 * 1024,
        description="Without a system message, the prefix hash covers the prompt's first "
        "this-many bytes (with one, the whole system message): long enough to tell different "
        "templates apart, short enough that requests sharing a template share a server.",
    )
    max_depth: int = Field(
        default=32, ge=4, le=256, description="Deepest JSON nesting read; deeper: not read."
    )
    prompt_tokens_header: HeaderName = Field(
        default="x-prompt-tokens", description="Estimated prompt tokens."
    )
    max_tokens_header: HeaderName = Field(
        default="x-max-tokens", description="The body's max_tokens (or max_completion_tokens)."
    )
    cost_tokens_header: HeaderName = Field(
        default="x-cost-tokens",
        description="The request's cost in tokens, estimated prompt tokens + max_tokens, in one "
        "header because Envoy's rate limit reads a cost from one (`limits.cost_header`'s "
        "default); a client's own whole number from 1 to 10^9 wins.",
    )
    stream_header: HeaderName = Field(default="x-stream", description="`true` or `false`.")
    prefix_hash_header: HeaderName = Field(
        default="x-prefix-hash",
        description="Hash of the prompt's prefix; the default route hash policy hashes it, so "
        "MAGLEV keeps one prefix on one server (warm KV cache).",
    )
    keywords_header: HeaderName = Field(
        default="x-prompt-keywords",
        description="`,route-a,route-b,`: the routes whose `match.keywords` the prompt contains.",
    )
