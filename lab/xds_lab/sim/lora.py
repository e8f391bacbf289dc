"""A simulated vLLM server's LoRA adapter slots: ``max_loras`` adapters on the GPU at once,
an adapter a request asks for loaded on admission (its load time added to that step), the
least recently used idle adapter evicted for it, and none admitted while every slot holds an
adapter in use (the request waits, as vLLM's scheduler keeps it waiting).

``vllm:lora_requests_info`` is written as vLLM writes it: a gauge per combination of
``max_lora``, ``running_lora_adapters`` and ``waiting_lora_adapters`` whose value is the time
it was last current, so each state the server has been in stays a series and the newest one
is now; none until an adapter was loaded.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["LoraSlots"]


class LoraSlots:
    """The adapter slots of one server."""

    def __init__(self, max_loras: int, *, load_s: float) -> None:
        self.max_loras = max_loras
        self.load_s = load_s
        self.in_use: OrderedDict[str, int] = OrderedDict()
        """Adapter -> its running requests, least recently used first."""
        self.loads = 0
        self._series: dict[tuple[str, str], float] = {}

    def admit(self, adapter: str) -> float | None:
        """Seconds the request's admission adds to its step (0 when loaded, ``load_s`` for a
        load); ``None`` when no slot can take it now."""
        if adapter in self.in_use:
            self.in_use[adapter] += 1
            self.in_use.move_to_end(adapter)
            return 0.0
        if len(self.in_use) >= self.max_loras:
            idle = next((a for a, n in self.in_use.items() if n == 0), None)
            if idle is None:
                return None
            del self.in_use[idle]
        self.in_use[adapter] = 1
        self.loads += 1
        return self.load_s

    def release(self, adapter: str) -> None:
        """A request for ``adapter`` left the batch."""
        if adapter in self.in_use:
            self.in_use[adapter] = max(0, self.in_use[adapter] - 1)

    def series(self, waiting: Iterable[str]) -> list[tuple[dict[str, str], float]]:
        """``vllm:lora_requests_info``'s samples now (labels, value), the current state's
        stamped with the time; empty before the first load."""
        if not self.loads:
            return []
        running = ",".join(a for a, n in self.in_use.items() if n > 0)
        self._series[(running, ",".join(dict.fromkeys(waiting)))] = time.time()
        return [
            (
                {
                    "max_lora": str(self.max_loras),
                    "waiting_lora_adapters": queued,
                    "running_lora_adapters": run,
                },
                at,
            )
            for (run, queued), at in self._series.items()
        ]
