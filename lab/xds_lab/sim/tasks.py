"""Named background tasks whose crash is logged, never silent."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

__all__ = ["spawn"]

_log = structlog.get_logger(__name__)
# The event loop keeps only weak references to tasks; hold them until they finish.
_live: set[asyncio.Task[Any]] = set()


def _report(task: asyncio.Task[Any]) -> None:
    _live.discard(task)
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        _log.error("background task crashed", task=task.get_name(), exc_info=exc)


def spawn(coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
    """Start ``coro`` as a named task; a crash is logged with the task's name."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    _live.add(task)
    task.add_done_callback(_report)
    return task
