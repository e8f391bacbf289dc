"""Named, guarded background tasks: a crash is logged, never silent."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

__all__ = ["guarded_task"]

log = structlog.get_logger(__name__)
_running: set[asyncio.Task[Any]] = set()
"""The event loop keeps only weak references to tasks: a task nobody else holds (a restart
started from a request handler, say) is kept here until it ends, so it cannot vanish midway."""


def guarded_task(coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
    """Start ``coro`` as a task called ``name``; an exception is logged when it ends."""
    task = asyncio.create_task(coro, name=name)
    _running.add(task)

    def report(done: asyncio.Task[Any]) -> None:
        _running.discard(done)
        if not done.cancelled() and (exc := done.exception()) is not None:
            log.error("background task crashed", task=name, exc_info=exc)

    task.add_done_callback(report)
    return task
