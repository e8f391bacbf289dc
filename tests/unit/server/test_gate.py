"""The initial-answer gate: at most ``limit`` holders, and a holder that never gives its slot
back (an Envoy that never reads) loses it after ``hold_s``."""

from __future__ import annotations

import asyncio

from xds_control.server.gate import InitialGate


async def test_at_most_limit_hold_a_slot_and_a_stuck_one_loses_it() -> None:
    gate = InitialGate(limit=2, hold_s=0.2)
    first = await gate.enter()
    await gate.enter()  # never given back, as by a write stuck in flow control
    third = asyncio.create_task(gate.enter())
    await asyncio.sleep(0.05)
    assert not third.done()  # two holders: the third waits
    first()
    first()  # giving back twice gives back once
    release = await asyncio.wait_for(third, 0.1)
    fourth = asyncio.create_task(gate.enter())
    await asyncio.sleep(0.05)
    assert not fourth.done()
    await asyncio.wait_for(fourth, 0.5)  # the stuck holder's slot came back on its own
    release()
