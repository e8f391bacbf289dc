"""A discovered endpoint: one inference server of one pool."""

from __future__ import annotations

from dataclasses import dataclass

from xds_control.config import Engine
from xds_control.config.devices import Device
from xds_control.config.kv_events import KvEventPorts
from xds_control.config.roles import Role
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
    engine: Engine | None = None
    """The server's own engine, when config (an endpoint entry's ``engine``) or discovery (the
    pod label ``xds-control.io/engine``) names one; ``None``: the pool's. Read it through
    ``config.engine_of``: the effective engine selects the metric names the server is read in (from
    Prometheus and the direct scrape) and its engine base weight."""
    gpu_class: str | None = None
    """GPU class as discovery labels it (Kubernetes), e.g. ``a100-80gb``; informational."""
    model: str | None = None
    """Served model as discovery labels it (Kubernetes); informational."""
    kv_events: KvEventPorts | None = None
    """Its own KV-event ports, when config (an endpoint entry's ``kv_events``) or discovery
    (a pod's ``xds-control.io/kv-events-port`` annotation or ``kv-events`` container port)
    names them; ``None``: its pool's."""
    role: Role = Role.BOTH
    """Its part in a disaggregated pool, from config (an endpoint entry's ``role``) or discovery
    (the pod label ``llm-d.ai/role``); ``BOTH`` when nothing names one."""
