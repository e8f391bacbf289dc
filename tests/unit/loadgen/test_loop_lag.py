"""The lag ticker sees a loop that was kept from running, and only then."""

from __future__ import annotations

import asyncio
import time

from xds_lab.loadgen.loop_lag import LagTicker


async def test_a_blocked_loop_shows_as_lag_and_an_idle_one_does_not() -> None:
    async with LagTicker(period_s=0.005) as ticker:
        await asyncio.sleep(0.1)
        idle = ticker.take()
        time.sleep(0.12)  # noqa: ASYNC251 -- on purpose: a busy core, as every task sees it
        await asyncio.sleep(0.05)
    blocked = ticker.take()
    assert idle["ticks"] >= 5
    assert idle["p50_s"] < 0.05
    assert blocked["max_s"] >= 0.1
    assert ticker.take()["ticks"] == 0  # stopped: nothing more is recorded
