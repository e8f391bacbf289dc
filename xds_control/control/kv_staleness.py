"""Whether a server's KV events have stopped, judged with what the engine last read of it:
the one rule ``/v1/status`` shows and the picker falls back on."""

from __future__ import annotations

from collections.abc import Mapping

from xds_control.discovery import Health
from xds_control.engine import WeightDecision
from xds_control.signals import Signal
from xds_control.signals.kv_events import KvEvents, is_stale
from xds_control.signals.kv_subscriber import KvStatus

__all__ = ["events_stale", "server_stale"]


def server_stale(
    status: KvStatus, *, decision: WeightDecision | None, stale_after_s: float
) -> bool:
    """Healthy and running requests by the engine's reading, yet silent for ``stale_after_s``.
    Without a reading (no signal source) staleness is never claimed."""
    running = None
    if decision is not None and decision.explanation.sample is not None:
        running = decision.explanation.sample.value(Signal.RUNNING)
    healthy = decision is not None and decision.health is Health.HEALTHY
    return is_stale(status, healthy=healthy, busy=bool(running), stale_after_s=stale_after_s)


def events_stale(
    kv: KvEvents, decisions: Mapping[str, tuple[WeightDecision, ...]], *, pool: str, address: str
) -> bool:
    """``server_stale`` for ``address`` of ``pool``; ``False`` when it is not subscribed."""
    found = kv.subscription(address)
    if found is None:
        return False
    settings, status = found
    decision = next((d for d in decisions.get(pool, ()) if d.address == address), None)
    return server_stale(status, decision=decision, stale_after_s=settings.stale_after_s)
