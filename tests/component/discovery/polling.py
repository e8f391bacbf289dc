"""Waiting on a watching discovery source: its endpoints once a check holds, or its error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from xds_control.discovery import Endpoint, EndpointSource
from xds_control.errors import DiscoveryError

__all__ = ["until", "until_error"]


async def until(
    source: EndpointSource,
    check: Callable[[tuple[Endpoint, ...]], bool],
    *,
    timeout: float = 5.0,
) -> tuple[Endpoint, ...]:
    """The source's endpoints once ``check`` holds; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: tuple[Endpoint, ...] | str = ()
    while time.monotonic() < deadline:
        try:
            last = await source.fetch()
        except DiscoveryError as exc:
            last = str(exc)
        else:
            if check(last):
                return last
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out; the source has {last}")


async def until_error(source: EndpointSource, *, timeout: float = 5.0) -> str:
    """The source's error once it has one; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await source.fetch()
        except DiscoveryError as exc:
            return str(exc)
        await asyncio.sleep(0.02)
    raise AssertionError("the source never reported an error")
