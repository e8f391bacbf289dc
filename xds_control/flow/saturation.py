"""Whether a pool is saturated: no healthy server has room for one more request. Pure.

``Saturation`` is the seam the flow controller reads pools through; the picker implements it
(it knows each pool's servers and what it sent them), so flow control needs no picker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from xds_control.config.flow import FlowControl

__all__ = ["Saturation", "Server", "has_room", "saturated"]


class Saturation(Protocol):
    """What flow control reads of the pools it holds requests for. Each call is a look at
    the pool now, cheap and never blocking (the controller asks on every request and every
    release); an exception means no answer: the controller logs it and tries again later."""

    def flow_control(self, pool: str) -> FlowControl | None:
        """``pool``'s flow control settings; ``None``: the pool has none (nothing is held)."""
        ...

    def saturated(self, pool: str) -> bool:
        """No healthy server of ``pool`` has room for one more request (``saturated``)."""
        ...

    def ready(self, pool: str) -> bool:
        """Some server of ``pool`` is healthy (a request held to its end is refused 429 if so,
        else 503)."""
        ...


class Server(Protocol):
    """What saturation reads of a server (the picker's ``Candidate`` is one)."""

    @property
    def address(self) -> str: ...
    @property
    def healthy(self) -> bool: ...
    @property
    def waiting(self) -> float: ...
    @property
    def observed_at(self) -> float | None: ...
    @property
    def kv_usage(self) -> float | None: ...
    @property
    def kv_observed_at(self) -> float | None: ...


def has_room(
    candidate: Server, *, unanswered: int, fresh_after: float, settings: FlowControl
) -> bool:
    """``candidate`` can take one more: its engine's waiting queue (a reading taken after
    ``fresh_after``) plus ``unanswered`` (what this picker sent it since that reading, or
    since ever without a fresh one, that it has not answered) is under ``queue_depth``, and
    its KV cache (a fresh reading) is under ``kv_usage``."""
    fresh = candidate.observed_at is not None and candidate.observed_at >= fresh_after
    waiting = (candidate.waiting if fresh else 0.0) + unanswered
    if waiting >= settings.queue_depth:
        return False
    usage, read_at = candidate.kv_usage, candidate.kv_observed_at
    fresh_kv = usage is not None and read_at is not None and read_at >= fresh_after
    return not (fresh_kv and usage is not None and usage >= settings.kv_usage)


def saturated(
    candidates: Sequence[Server],
    *,
    unanswered: Mapping[str, int],
    now: float,
    settings: FlowControl,
) -> bool:
    """No healthy candidate has room (also: no healthy candidate at all)."""
    fresh_after = now - settings.max_signal_age_s
    return not any(
        c.healthy
        and has_room(
            c, unanswered=unanswered.get(c.address, 0), fresh_after=fresh_after, settings=settings
        )
        for c in candidates
    )
