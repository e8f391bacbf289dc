"""The controller: admits at once with room, holds while saturated and lets one go per freed
place, refuses with the reason when the queue is full or the wait is over."""

from __future__ import annotations

import asyncio

import pytest

from xds_control.config.flow import FlowControl
from xds_control.flow import Band, FlowController, Hold, Refuse, Refused


class _Pool:
    """A pool with ``room`` places; a dispatched request takes one."""

    def __init__(self, room: int, *, ready: bool = True) -> None:
        self.room = room
        self.is_ready = ready
        self.flow: FlowControl | None = None

    def flow_control(self, pool: str) -> FlowControl | None:
        return self.flow

    def saturated(self, pool: str) -> bool:
        return self.room <= 0

    def ready(self, pool: str) -> bool:
        return self.is_ready


def _controller(pool: _Pool, flow: FlowControl | None) -> FlowController:
    pool.flow = flow
    return FlowController(pools=pool)


async def _admit(
    controller: FlowController,
    pool: _Pool,
    name: str,
    *,
    band: Band = Band.MEDIUM,
    tenant: str = "",
) -> str:
    headers = {pool.flow.tenant_header: tenant} if pool.flow is not None else {}
    verdict = controller.admit(
        pool="chat", request=name, headers=headers, body=b"x" * 10, band=band
    )
    if isinstance(verdict, Hold):
        verdict = await controller.wait(verdict)
    if isinstance(verdict, Refuse):
        raise verdict.refused
    pool.room -= 1  # the pick lands on a server
    return name


async def test_with_room_a_request_is_not_held() -> None:
    pool = _Pool(room=1)
    controller = _controller(pool, FlowControl())
    assert not controller.holds("chat")
    assert await asyncio.wait_for(_admit(controller, pool, "a"), 1) == "a"


async def test_without_flow_control_nothing_is_held_even_saturated() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, None)
    assert await asyncio.wait_for(_admit(controller, pool, "a"), 1) == "a"


async def test_held_requests_go_one_per_freed_place_critical_first() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_wait_s=10))
    order: list[str] = []

    async def one(name: str, band: Band) -> None:
        order.append(await _admit(controller, pool, name, band=band))

    tasks = [
        asyncio.create_task(one("m", Band.MEDIUM)),
        asyncio.create_task(one("c", Band.CRITICAL)),
        asyncio.create_task(one("h", Band.HIGH)),
    ]
    await asyncio.sleep(0.01)
    assert controller.queued("chat") == 3
    assert order == []
    pool.room = 1  # one server finished one
    controller.release()
    await asyncio.sleep(0.01)
    assert order == ["c"]  # one place, one request: the next waits for the next place
    pool.room = 2
    controller.release()
    await asyncio.gather(*tasks)
    assert order == ["c", "h", "m"]


async def test_a_full_queue_refuses_at_once_with_429() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_queued=1, max_wait_s=10))
    waiting = asyncio.create_task(_admit(controller, pool, "a"))
    await asyncio.sleep(0.01)
    with pytest.raises(Refused) as refused:
        await _admit(controller, pool, "b")
    assert (refused.value.status, refused.value.reason) == (429, "queue-full")
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert controller.queued("chat") == 0  # a cancelled wait leaves the queue


async def test_a_request_whose_client_left_after_dispatch_does_not_block_the_next() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_wait_s=10))
    first = asyncio.create_task(_admit(controller, pool, "a"))
    second = asyncio.create_task(_admit(controller, pool, "b"))
    await asyncio.sleep(0.01)
    pool.room = 2
    controller.release()  # "a" dispatched; it is cancelled before it returns
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert await asyncio.wait_for(second, 1) == "b"


@pytest.mark.parametrize(
    ("ready", "status", "reason"), [(True, 429, "max-wait"), (False, 503, "no-ready-endpoint")]
)
async def test_past_the_wait_a_held_request_is_refused_with_the_reason(
    ready: bool, status: int, reason: str
) -> None:
    pool = _Pool(room=0, ready=ready)
    controller = _controller(pool, FlowControl(max_wait_s=0.05))
    with pytest.raises(Refused) as refused:
        await asyncio.wait_for(_admit(controller, pool, "a"), 2)
    assert (refused.value.status, refused.value.reason) == (status, reason)
    assert controller.queued("chat") == 0


async def test_the_tick_lets_a_request_go_when_room_appears_unannounced() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_wait_s=5))
    ticking = asyncio.create_task(controller.run())
    try:
        waiting = asyncio.create_task(_admit(controller, pool, "a"))
        await asyncio.sleep(0.02)
        pool.room = 1  # a server turned ready: nobody called release
        assert await asyncio.wait_for(waiting, 2) == "a"
    finally:
        ticking.cancel()


async def test_a_tenant_over_its_share_waits_behind_a_lighter_one_of_a_lower_band() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_wait_s=10))
    for _ in range(6):
        controller.let_through(pool="chat", tenant="heavy")
    for _ in range(4):
        controller.let_through(pool="chat", tenant="light")
    order: list[str] = []

    async def one(name: str, tenant: str, band: Band) -> None:
        order.append(await _admit(controller, pool, name, band=band, tenant=tenant))

    tasks = [
        asyncio.create_task(one("heavy-critical", "heavy", Band.CRITICAL)),
        asyncio.create_task(one("light-medium", "light", Band.MEDIUM)),
    ]
    await asyncio.sleep(0.01)
    pool.room = 2
    controller.release()
    await asyncio.gather(*tasks)
    assert order == ["light-medium", "heavy-critical"]


async def test_a_band_with_a_shorter_wait_is_refused_at_its_own_ttl() -> None:
    pool = _Pool(room=0)
    controller = _controller(pool, FlowControl(max_wait_s=30, band_max_wait_s={"medium": 0.05}))
    high = asyncio.create_task(_admit(controller, pool, "h", band=Band.HIGH))
    with pytest.raises(Refused) as refused:
        await asyncio.wait_for(_admit(controller, pool, "m"), 2)
    assert (refused.value.status, refused.value.reason) == (429, "max-wait")
    assert not high.done()  # high waits max_wait_s
    pool.room = 1
    controller.release()
    assert await asyncio.wait_for(high, 1) == "h"
