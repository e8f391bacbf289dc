"""JSON views of what the control plane serves: pure functions of its state."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from google.protobuf.json_format import MessageToDict

from xds_control.config import Config
from xds_control.control import EngineView
from xds_control.signals.sample import Sample
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["LoopStatus", "endpoints_view", "snapshot_view", "status_view", "weights_view"]


class LoopStatus(Protocol):
    """The control loop's state as ``/v1/status`` and the event ring show it."""

    @property
    def config(self) -> Config:
        """The config served (the last good one)."""
        ...

    @property
    def config_path(self) -> Path:
        """Where the config is read from."""
        ...

    @property
    def config_error(self) -> str | None:
        """Why the last edit was rejected, or ``None``."""
        ...

    @property
    def discovery_errors(self) -> Mapping[str, str]:
        """Pool -> its source's last error."""
        ...

    @property
    def errors(self) -> Mapping[str, str]:
        """Phase -> the unexpected error of its last run."""
        ...

    @property
    def version(self) -> str:
        """The version last published ('' before the first)."""
        ...

    @property
    def published_at(self) -> float:
        """When it was published (Unix seconds)."""
        ...


def status_view(state: LoopStatus) -> dict[str, Any]:
    """Version, config health and discovery errors."""
    return {
        "version": state.version,
        "published_at": state.published_at,
        "config_path": str(state.config_path),
        "config_error": state.config_error,
        "discovery_errors": dict(state.discovery_errors),
        "errors": dict(state.errors),
        **state.config.summary(),
    }


def snapshot_view(snapshot: Snapshot | None, *, resources: bool) -> dict[str, Any]:
    """Per type: version and resource names, and the resources themselves if asked."""
    if snapshot is None:
        return {"version": None, "types": []}
    types = []
    for type_url in urls.ORDER:
        rs = snapshot.resource_set(type_url)
        entry: dict[str, Any] = {
            "type": urls.SHORT_NAMES[type_url],
            "type_url": type_url,
            "version": rs.version,
            "names": sorted(rs.resources),
        }
        if resources:
            entry["resources"] = [
                MessageToDict(rs.resources[name].message) for name in sorted(rs.resources)
            ]
        types.append(entry)
    return {"version": snapshot.version, "types": types}


def endpoints_view(snapshot: Snapshot | None) -> dict[str, list[dict[str, Any]]]:
    """Each pool's endpoints with the weight and health being served."""
    if snapshot is None:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for name, prepared in sorted(snapshot.load_assignments.resources.items()):
        rows = []
        for locality in prepared.message.endpoints:
            for lb in locality.lb_endpoints:
                sock = lb.endpoint.address.socket_address
                rows.append(
                    {
                        "address": f"{sock.address}:{sock.port_value}",
                        "weight": lb.load_balancing_weight.value,
                        "health": MessageToDict(lb).get("healthStatus", "UNKNOWN"),
                    }
                )
        out[name] = rows
    return out


def _adapters(sample: Sample | None) -> dict[str, Any]:
    """``{"adapters": ...}`` for a server that reports LoRA adapters; nothing otherwise, so
    rows of servers without them are as they were."""
    if sample is None or sample.adapters is None:
        return {}
    held = sample.adapters
    return {
        "adapters": {
            "running": sorted(held.running),
            "waiting": sorted(held.waiting),
            "max_lora": held.max_lora,
        }
    }


def weights_view(
    engine: EngineView | None, snapshot: Snapshot | None, *, explain: bool
) -> dict[str, Any]:
    """Per pool, each endpoint's weight and why; with ``explain``, every factor and input."""
    if engine is None or not engine.enabled:
        static = {
            pool: [{**row, "reason": "static: no signal source configured"} for row in rows]
            for pool, rows in endpoints_view(snapshot).items()
        }
        return {"engine": False, "pools": static}
    pools: dict[str, list[dict[str, Any]]] = {}
    for pool, decisions in engine.pools.items():
        if explain:
            pools[pool] = [{**d.to_json(), **_adapters(d.explanation.sample)} for d in decisions]
        else:
            pools[pool] = [
                {
                    "address": d.address,
                    "weight": d.weight,
                    "health": d.health.value,
                    "reason": d.explanation.reason,
                    **_adapters(d.explanation.sample),
                }
                for d in decisions
            ]
    routes = {
        key: {pool: w.to_json() if explain else w.weight for pool, w in weights.items()}
        for key, weights in engine.routes.items()
    }
    return {
        "engine": True,
        "cycle": engine.cycle,
        "source_error": engine.source_error,
        "pools": pools,
        "routes": routes,
        "autoscale": {pool: r.to_json() for pool, r in engine.autoscale.items()},
    }
