"""Which engine a server runs: its own when config or discovery names one, else its pool's.

The one place this is decided; the signal sources (which metric names to read a server in)
and the weight engine (its engine base weight) both ask it.
"""

from __future__ import annotations

from typing import Protocol

from xds_control.config.model import Engine, Pool

__all__ = ["NamesEngine", "engine_of"]


class NamesEngine(Protocol):
    """A server that may name its own engine (a discovered ``Endpoint``, an endpoint entry)."""

    @property
    def engine(self) -> Engine | None:
        """Its own engine; ``None``: its pool's."""
        ...


def engine_of(pool: Pool, server: NamesEngine) -> Engine:
    """The engine ``server`` of ``pool`` runs: its own, else the pool's ``engine``."""
    return server.engine or pool.engine
