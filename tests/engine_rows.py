"""Endpoints and samples for the engine's unit tests: endpoint ``i`` at 10.0.0.i:8000 with 64
batch slots, and a sample of named readings observed at ``NOW`` (or a later cycle's time)."""

from __future__ import annotations

from xds_control.config import Engine
from xds_control.discovery import Endpoint
from xds_control.signals import Sample, Signal

__all__ = ["NOW", "a_sample", "an_endpoint"]

NOW = 1_700_000_000.0


def an_endpoint(i: int, engine: Engine | None = None) -> Endpoint:
    """Endpoint ``i`` (10.0.0.i:8000, 64 batch slots), of ``engine`` or its pool's."""
    host = f"10.0.0.{i}"
    return Endpoint(
        address=f"{host}:8000", host=host, port=8000, weight=10, batch_slots=64, engine=engine
    )


def a_sample(address: str, *, at: float = NOW, **values: float) -> Sample:
    """A sample of ``address`` with the readings named by signal value, observed ``at``."""
    return Sample.build(
        address=address,
        values=[(Signal(k), v) for k, v in values.items()],
        observed_at=at,
        source="test",
    )
