"""The seam between signal sources and the engine, and what a source is asked for."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from xds_control.config import Engine, Pool
from xds_control.signals.sample import Sample

__all__ = ["SignalSource", "Target", "targets_for_pool"]


@dataclass(frozen=True, slots=True)
class Target:
    """An endpoint to collect signals for: its address (the identity everywhere), the engine
    whose metric names it exports, and its pool's TTFT target (SLO compliance depends on it)."""

    address: str
    engine: Engine
    ttft_slo_s: float


def targets_for_pool(pool: Pool, addresses: Iterable[str]) -> tuple[Target, ...]:
    """The targets of ``pool``'s endpoints at ``addresses``."""
    slo = pool.weights.ttft_slo_s
    return tuple(Target(address=a, engine=pool.engine, ttft_slo_s=slo) for a in addresses)


class SignalSource(Protocol):
    """Per-endpoint samples for a set of targets.

    ``fetch`` returns a ``Sample`` for every target it learned something about, keyed by
    address; a target it has nothing for is simply absent (the engine then holds, decays and
    finally uses the base weight). Values that are NaN, infinite, negative or out of range are
    never returned as readings: they appear in ``Sample.rejected``.

    Partial failure (one query, one endpoint) is not an error: the source logs it, counts it
    and returns what it has. ``fetch`` raises ``SignalError`` only when it learned nothing at
    all this cycle (Prometheus unreachable, every query failed); the caller then keeps its
    last good samples and weights, and the loop goes on. Any other exception is a bug.

    Sources must not block the event loop, and ``fetch`` must return within roughly the
    source's configured timeout regardless of how many targets there are.
    """

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        """Samples for ``targets`` now, keyed by endpoint address."""
        ...
