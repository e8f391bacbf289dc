"""A picker pool's LoRA adapters: which ``model`` names are adapters of the pool's base model,
and what a server that does not run the request's adapter costs in the picker's ranking.

Many fine-tunes share one base model; a request names its adapter in the body's ``model``. A
vLLM server holds at most ``--max-loras`` adapters on its GPU at once and reports which ones
its running and waiting requests use (``vllm:lora_requests_info``, read by the direct
scrape). A request for an adapter the server does not hold waits while it loads; one for a
server whose slots all hold adapters in use waits until one of them drains.
"""

from __future__ import annotations

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["LoraAdapters"]


class LoraAdapters(StrictModel):
    """The pool's adapters and what missing one costs (docs/picker.md, *adapter*)."""

    names: list[str] = Field(
        min_length=1,
        description="The adapters the pool's servers serve, as requests name them in `model` "
        "(vLLM's `--lora-modules NAME=PATH`, or `lora_name` of `/v1/load_lora_adapter`). A "
        "request naming one of them is ranked with the adapter-affinity term; any other "
        "`model` (the base model's) is ranked as before.",
    )
    load_tokens: float = Field(
        default=512.0,
        ge=0,
        le=1_000_000,
        description="What a server with a free adapter slot that does not run the request's "
        "adapter costs, in prompt tokens at the pool's fastest prefill speed (the unit of the "
        "picker's cost): the time its load takes. A rank-16 adapter of an 8B model is some "
        "tens of MB, loaded from host memory in tens of milliseconds and from disk in a few "
        "hundred; 512 tokens is about 100 ms of an H100's prefill (0.2 ms per token).",
    )
    full_tokens: float = Field(
        default=16_384.0,
        ge=0,
        le=10_000_000,
        description="What a server whose adapter slots all hold adapters in use costs for an "
        "adapter it does not run, in the same unit: the request waits until one adapter's "
        "requests have all finished, about one request's length (some 250 output tokens at "
        "10-15 ms each, 3 s, some 16,000 tokens of prefill). Half of it when the adapter is "
        "already waiting there: the request joins the load that slot will take.",
    )
