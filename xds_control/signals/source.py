"""The seam between signal sources and the engine, and what a source is asked for."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from xds_control.config import Engine, Pool, engine_of
from xds_control.signals.sample import Sample

__all__ = ["Server", "SignalSource", "Target", "targets_for_pool"]


@dataclass(frozen=True, slots=True)
class Target:
    """An endpoint to collect signals for: its address (the identity everywhere), the engine
    whose metric names it exports, and its pool's TTFT target (SLO compliance depends on it)."""

    address: str
    engine: Engine
    ttft_slo_s: float


class Server(Protocol):
    """What a target is made from: a discovered endpoint (``discovery.Endpoint``) as the
    signals stage sees it, its address and the engine it names, if any."""

    @property
    def address(self) -> str:
        """``IP:PORT``."""
        ...

    @property
    def engine(self) -> Engine | None:
        """Its own engine; ``None``: its pool's."""
        ...


def targets_for_pool(pool: Pool, endpoints: Iterable[Server]) -> tuple[Target, ...]:
    """The targets of ``pool``'s ``endpoints``, each read in its own engine's dialect
    (``config.engine_of``: the endpoint's engine, else the pool's)."""
    slo = pool.weights.ttft_slo_s
    return tuple(
        Target(address=e.address, engine=engine_of(pool, e), ttft_slo_s=slo) for e in endpoints
    )


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
