"""``/v1/limits``: every admission rate the control plane set, with the P99 it came from, and
what each output-token budget has charged in its window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from xds_control.config import Config
from xds_control.limits import RateRow
from xds_control.xds.routes import class_route_name

__all__ = ["LimitRows", "TokenBudgetRows", "limits_view", "narrowed", "rate_json"]


class LimitRows(Protocol):
    """The priority-class rates the limits stage set (``Limiter``)."""

    @property
    def rows(self) -> tuple[RateRow, ...]:
        """One row per node group, route and class."""
        ...

    @property
    def cycle(self) -> int:
        """Cycles run so far."""
        ...

    @property
    def source_error(self) -> str | None:
        """The P99 source's last error, ``None`` when its last read worked."""
        ...


def rate_json(row: RateRow) -> dict[str, Any]:
    """One row as the admin API shows it."""
    ceiling = row.adapted.rates[row.priority]
    return {
        "group": row.group,
        "listener": row.listener,
        "route": row.route,
        "envoy_route": class_route_name(row.route, row.priority),
        "priority": row.priority.value,
        "pools": list(row.pools),
        "fleet_rps": round(ceiling, 3),
        "envoys": row.envoys,
        "connected": row.connected,
        "gateway_fleet": row.fleet,
        "share": round(1 / max(1, row.envoys), 4),
        "envoy_rps": round(row.bucket.rate, 3),
        "bucket": {
            "max_tokens": row.bucket.max_tokens,
            "tokens_per_fill": row.bucket.tokens_per_fill,
            "fill_interval_s": row.bucket.fill_interval_s,
        },
        "p99": {
            pool: {"ttft_s": lat.ttft_p99_s, "tpot_s": lat.tpot_p99_s}
            for pool, lat in row.latency.items()
        },
        "pressure": None if row.adapted.pressure is None else round(row.adapted.pressure, 3),
        "action": row.adapted.action,
    }


def _policies(config: Config | None) -> dict[str, dict[str, Any]]:
    """Listener -> its rates' unit and P99 targets (what a row's pressure is measured by)."""
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


TokenBudgetRows = Callable[[], list[dict[str, object]]]
"""The picker's output-token windows (``flow.budgets.TokenBudgets.rows``)."""


def limits_view(
    limiter: LimitRows | None,
    *,
    config: Config | None = None,
    token_budgets: TokenBudgetRows | None = None,
) -> dict[str, Any]:
    """One row per node group, route and priority class: the fleet-wide fill rate, the Envoys
    sharing it, each one's bucket, the pools' P99s, the listener's targets (with ``config``)
    and the pressure that moved the rate; and one per output-token budget and tenant in its
    current window (with ``token_budgets``)."""
    tokens = token_budgets() if token_budgets is not None else []
    if limiter is None:
        return {
            "enabled": False,
            "cycle": 0,
            "source_error": None,
            "budgets": [],
            "token_budgets": tokens,
        }
    policies = _policies(config)
    rows = [{**rate_json(row), **policies.get(row.listener, {})} for row in limiter.rows]
    return {
        "enabled": bool(rows),
        "cycle": limiter.cycle,
        "source_error": limiter.source_error,
        "budgets": rows,  # the key API users read; its rows are the classes' rates
        "token_budgets": tokens,
    }


def narrowed(view: dict[str, Any], *, route: str = "", group: str = "") -> dict[str, Any]:
    """``limits_view``'s answer for one route (LISTENER/ROUTE) and node group, or all (empty):
    its rate rows, and the output-token budgets of the pools they send to. Pure."""
    rows = [
        r
        for r in view["budgets"]
        if (not route or f"{r['listener']}/{r['route']}" == route)
        and (not group or r["group"] == group)
    ]
    pools = {pool for r in rows for pool in r["pools"]}
    tokens = [t for t in view.get("token_budgets", []) if not route or t["pool"] in pools]
    return {**view, "budgets": rows, "token_budgets": tokens}
