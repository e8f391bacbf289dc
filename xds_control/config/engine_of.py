"""Which engine a server runs: its own when config or discovery names one, else its pool's.

The one place this is decided; the signal sources (which metric names to read a server in)
and the weight engine (its engine base weight) both ask it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from xds_control.config.model import Engine, Pool

__all__ = ["PER_REQUEST_STEP", "NamesEngine", "engine_of", "measures_comparable"]

PER_REQUEST_STEP = frozenset({Engine.TRITON, Engine.ONNXRUNTIME})
"""Engines whose step time is compute time per execution (a whole request), not per token."""


class NamesEngine(Protocol):
    """A server that may name its own engine (a discovered ``Endpoint``, an endpoint entry)."""

    @property
    def engine(self) -> Engine | None:
        """Its own engine; ``None``: its pool's."""
        ...


def engine_of(pool: Pool, server: NamesEngine) -> Engine:
    """The engine ``server`` of ``pool`` runs: its own, else the pool's ``engine``."""
    return server.engine or pool.engine


def measures_comparable(engines: Iterable[Engine]) -> bool:
    """Whether servers of these engines time their work in the same unit: all per-token step
    times, or all per-request ones (then only alike when their requests are alike, which a
    random split between them makes so)."""
    kinds = {engine in PER_REQUEST_STEP for engine in engines}
    return len(kinds) <= 1
