"""``/v1/limits``: every budget number the control plane set, with the P99 it came from."""

from __future__ import annotations

from typing import Any

from xds_control.config import Config
from xds_control.control.limiter import Limiter

__all__ = ["limits_view"]


def _policies(config: Config | None) -> dict[str, dict[str, Any]]:
    """Listener -> its budgets' unit and P99 targets (what a row's pressure is measured by)."""
    if config is None:
        return {}
    return {
        listener.name: {
            "unit": listener.limits.unit,
            "target": {
                "ttft_s": listener.limits.adapt.ttft_p99_target_s,
                "tpot_s": listener.limits.adapt.tpot_p99_target_s,
            },
        }
        for listener in config.listeners
        if listener.limits is not None
    }


def limits_view(limiter: Limiter | None, *, config: Config | None = None) -> dict[str, Any]:
    """One row per node group, route and priority class: the fleet-wide fill rate, the Envoys
    sharing it, each one's bucket, the pools' P99s, the listener's targets (with ``config``)
    and the pressure that moved the rate."""
    if limiter is None:
        return {"enabled": False, "cycle": 0, "source_error": None, "budgets": []}
    policies = _policies(config)
    rows = [{**row.to_json(), **policies.get(row.listener, {})} for row in limiter.rows]
    return {
        "enabled": bool(rows),
        "cycle": limiter.cycle,
        "source_error": limiter.source_error,
        "budgets": rows,
    }
