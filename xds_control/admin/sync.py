"""Is an Envoy on the version served? The rule ``xdsctl status`` and ListStreams apply."""

from __future__ import annotations

from typing import Any

from xds_control.admin.protocol import Snapshots, Streams
from xds_control.xds import type_urls as urls

__all__ = ["SYNC_STATES", "streams_view", "sync_status"]

SYNC_STATES = ("SYNCED", "STALE", "NACKED", "NOT SENT")


def sync_status(state: dict[str, Any] | None, *, served: str) -> str:
    """SYNCED (ACKed what is served, or reconnected holding it), NACKED (refused the newest
    sent), STALE (sent, not yet ACKed, or ACKed an older one) or NOT SENT, as istioctl says."""
    if state is None or (not state.get("sent_version") and not state.get("acked_version")):
        return "NOT SENT"
    if state["acked_version"] == served:
        return "SYNCED"
    if state["nacked_version"] and state["nacked_version"] == state["sent_version"]:
        return "NACKED"
    return "STALE"


def streams_view(*, registry: Streams, cache: Snapshots) -> list[dict[str, Any]]:
    """Every open stream with its origin and, per type, the version served and its sync state."""
    out = []
    for view in registry.describe():
        origin = registry.origin(view["stream"])
        snapshot = cache.snapshot(view["group"])
        served = {
            urls.SHORT_NAMES[t]: snapshot.resource_set(t).version if snapshot else ""
            for t in urls.ORDER
        }
        for t in view["types"]:
            t["served_version"] = served.get(t["type"], "")
            t["sync"] = sync_status(t, served=t["served_version"])
        out.append({**view, "peer": origin.peer, "connected_at": origin.connected_at})
    return out
