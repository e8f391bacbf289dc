"""A discovered endpoint: one inference server of one pool."""

from __future__ import annotations

from dataclasses import dataclass

from xds_control.config.devices import Device
from xds_control.discovery.health import Health

__all__ = ["Endpoint"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An inference server as discovery sees it; ``address`` (``IP:PORT``) is its identity
    everywhere downstream: signals are keyed by it, the engine decides per it."""

    address: str
    host: str
    port: int
    weight: int
    """Static weight from config (1..100): the weight until the engine decides otherwise."""
    batch_slots: int | None = None
    """Batch slots from config, for servers that do not export them; ``None``: the pool's."""
    device: Device | None = None
    """The GPU / MIG slice it runs on, when discovery knows it (single-device pools need it)."""
    health: Health = Health.HEALTHY
    """What discovery knows: a terminating Kubernetes pod is DRAINING, a not-ready one
    UNHEALTHY. The published health is the worse of this and the engine's."""
    engine: str | None = None
    """Engine type as discovery labels it (Kubernetes); informational: the pool's ``engine``
    selects metric names."""
    gpu_class: str | None = None
    """GPU class as discovery labels it (Kubernetes), e.g. ``a100-80gb``; informational."""
    model: str | None = None
    """Served model as discovery labels it (Kubernetes); informational."""
