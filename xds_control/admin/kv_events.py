"""``/v1/status``'s ``kv_events``: each server's KV-event subscription, and whether its events
have gone stale (``control.kv_staleness``)."""

from __future__ import annotations

from typing import Any, Protocol

from xds_control.config import KvEventsConfig
from xds_control.control import EngineView
from xds_control.control.kv_staleness import server_stale
from xds_control.signals.kv_subscriber import KvStatus

__all__ = ["KvSubscriptions", "kv_events_view"]


class KvSubscriptions(Protocol):
    """The servers' KV-event subscriptions (``KvEvents``)."""

    def statuses(self) -> list[tuple[str, KvEventsConfig, KvStatus, int]]:
        """Per subscription: its pool, its settings, its status and the blocks it holds."""
        ...


def kv_events_view(kv: KvSubscriptions, *, engine: EngineView | None) -> list[dict[str, Any]]:
    """One entry per subscribed server."""
    decisions = {d.address: d for pool in (engine.pools.values() if engine else ()) for d in pool}
    out = []
    for pool, settings, status, held in kv.statuses():
        age = status.last_event_age_s
        out.append(
            {
                "pool": pool,
                "server": status.server,
                "events": status.events,
                "last_seq": status.last_seq,
                "last_event_age_s": None if age is None else round(age, 3),
                "layout": None if status.layout is None else status.layout.value,
                "blocks": held,
                "batches": status.batches,
                "refused": status.refused,
                "restarts": status.restarts,
                "lost": status.lost,
                "stale": server_stale(
                    status,
                    decision=decisions.get(status.server),
                    stale_after_s=settings.stale_after_s,
                ),
            }
        )
    return out
