"""Named, guarded background tasks: a crash is logged, never silent.

A task the process cannot do without (the control loop, the scraper) passes ``on_crash``: the
caller then fails readiness and exits non-zero, so a supervisor restarts the process instead of
it serving a frozen snapshot forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

__all__ = ["guarded_task", "wait_set"]

log = structlog.get_logger(__name__)
_running: set[asyncio.Task[Any]] = set()
"""The event loop keeps only weak references to tasks: a task nobody else holds (a restart
started from a request handler, say) is kept here until it ends, so it cannot vanish midway."""


def guarded_task(
    coro: Coroutine[Any, Any, Any],
    *,
    name: str,
    on_crash: Callable[[str, BaseException], None] | None = None,
) -> asyncio.Task[Any]:
    """Start ``coro`` as a task called ``name``; an exception is logged when it ends, and
    ``on_crash(name, exception)`` is called (cancellation is not a crash)."""
    task = asyncio.create_task(coro, name=name)
    _running.add(task)

    def report(done: asyncio.Task[Any]) -> None:
        _running.discard(done)
        if done.cancelled() or (exc := done.exception()) is None:
            return
        log.error("background task crashed", task=name, exc_info=exc)
        if on_crash is not None:
            on_crash(name, exc)

    task.add_done_callback(report)
    return task


async def wait_set(event: asyncio.Event, *, timeout: float) -> bool:
    """Whether ``event`` is set within ``timeout`` seconds (at once when it is already set).

    Not ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives as the
    awaited event is set (it returns the result instead), and a loop that waits on it can then
    outlive the cancel that was to end it: a shutdown that never finishes. ``asyncio.timeout``
    lets the cancellation through."""
    if event.is_set():
        return True
    if timeout <= 0:
        return False
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()  # set while the loop was late to the timeout
    return True
