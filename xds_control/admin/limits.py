"""``/v1/limits``: every budget number the control plane set, with the P99 it came from."""

from __future__ import annotations

from typing import Any

from xds_control.control.limiter import Limiter

__all__ = ["limits_view"]


def limits_view(limiter: Limiter | None) -> dict[str, Any]:
    """One row per node group, route and priority class: the fleet-wide fill rate, the Envoys
    sharing it, each one's bucket, the pools' P99s and the pressure that moved the rate."""
    if limiter is None:
        return {"enabled": False, "cycle": 0, "source_error": None, "budgets": []}
    rows = [row.to_json() for row in limiter.rows]
    return {
        "enabled": bool(rows),
        "cycle": limiter.cycle,
        "source_error": limiter.source_error,
        "budgets": rows,
    }
