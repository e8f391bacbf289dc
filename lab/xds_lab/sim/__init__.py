"""A simulated fleet of OpenAI-compatible LLM inference servers (``xds-control sim``).

Each server models continuous batching, a prefix KV cache and the metrics real engines export,
so balancing decisions change what a client sees. Time is simulated with asyncio sleeps on the
real clock, so the servers behave realistically behind a real Envoy.
"""

from __future__ import annotations

__all__: list[str] = []
