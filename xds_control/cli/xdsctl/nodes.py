"""Finding a connected Envoy by node id: what ``config`` and ``diff`` start from."""

from __future__ import annotations

from typing import Any

from xds_control.cli.xdsctl.context import XdsctlApp

__all__ = ["served_for", "stream_of"]


def stream_of(app: XdsctlApp, node: str) -> dict[str, Any]:
    """The open stream of Envoy ``node``; aborts naming the connected ones if there is none."""
    streams = app.client.get("/v1/streams")
    for stream in streams:
        if stream["node_id"] == node:
            return dict(stream)
    known = ", ".join(sorted({s["node_id"] for s in streams})) or "none"
    app.abort(f"xdsctl: no Envoy with node id {node!r} is connected (connected: {known})", 1)


def served_for(app: XdsctlApp, stream: dict[str, Any]) -> dict[str, Any]:
    """The snapshot, with resources, that the stream's node group is served."""
    group = stream.get("group", "")
    query: dict[str, str | bool] = {"resources": True, **({"group": group} if group else {})}
    return dict(app.client.get("/v1/snapshot", **query))
