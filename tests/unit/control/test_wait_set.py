"""``wait_set``: an event awaited with a timeout, and a cancellation that is never lost."""

from __future__ import annotations

import asyncio

from xds_control.tasks import wait_set


async def _wait_forever(event: asyncio.Event) -> None:
    while True:  # a loop like the control loop's: wake on the event or the period
        event.clear()
        await wait_set(event, timeout=10)


async def test_a_cancel_that_arrives_as_the_event_is_set_ends_the_loop() -> None:
    # asyncio.wait_for on Python 3.11 returns the event's result here and drops the cancel: the
    # loop then runs on after its shutdown.
    event = asyncio.Event()
    task = asyncio.create_task(_wait_forever(event))
    await asyncio.sleep(0.01)
    event.set()
    await asyncio.sleep(0)  # the wait is done, its task not yet resumed
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1)
    assert done == {task}
    assert task.cancelled()


async def test_it_says_whether_the_event_came_within_the_timeout() -> None:
    event = asyncio.Event()
    assert await wait_set(event, timeout=0.01) is False
    assert await wait_set(event, timeout=0) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_set(event, timeout=5) is True
    assert await wait_set(event, timeout=0) is True  # already set: at once
