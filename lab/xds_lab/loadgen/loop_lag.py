"""Event-loop lag: how far behind real time a process ran while it measured.

A process that falls behind (other work on the cores, too many requests for one loop) inflates
every latency it measures or simulates, and nothing in the latencies says so. A ``LagTicker``
sleeps ``period_s`` over and over and records by how much each wake-up overshot; a run whose
p99 overshoot passes a limit is not a result (``xds_lab.bench.lag`` flags it).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from xds_lab.loadgen.stats import percentile

__all__ = ["TICK_S", "LagTicker", "lag_summary"]

TICK_S = 0.01
"""The ticker's sleep: short enough to see a stall of a few steps of the simulator."""


def lag_summary(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max overshoot (seconds) and the number of ticks; NaN with no ticks."""
    if not samples:
        return {"ticks": 0, "p50_s": math.nan, "p99_s": math.nan, "max_s": math.nan}
    return {
        "ticks": len(samples),
        "p50_s": percentile(samples, 50),
        "p99_s": percentile(samples, 99),
        "max_s": max(samples),
    }


class LagTicker:
    """Records the overshoot of every ``period_s`` sleep while running (an async context)."""

    def __init__(self, *, period_s: float = TICK_S) -> None:
        self.period_s = period_s
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.period_s)
            self.samples.append(max(0.0, time.monotonic() - before - self.period_s))

    def start(self) -> None:
        """Start ticking on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._tick(), name="lag-ticker")

    async def stop(self) -> None:
        """Stop ticking; the samples stay."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def take(self) -> dict[str, float]:
        """The summary of the samples so far, and start over."""
        summary = lag_summary(self.samples)
        self.samples = []
        return summary

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
