"""Waiting on a watching discovery source: its endpoints once a check holds, or its error."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from xds_control.discovery import EndpointSource
from xds_control.errors import DiscoveryError

__all__ = ["until", "until_error"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Fetches(Protocol[T_co]):
    """A watching source: an endpoint source, or the InferencePool catalog (names)."""

    async def fetch(self) -> T_co: ...


async def until(source: Fetches[T], check: Callable[[T], bool], *, timeout: float = 5.0) -> T:
    """What the source fetches once ``check`` holds; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | str = "nothing fetched yet"
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
