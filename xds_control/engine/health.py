"""Whether an endpoint takes new requests: failing ones are marked, never weighted 0.

Envoy keeps DRAINING and UNHEALTHY endpoints in the assignment but sends them no new
requests (its panic threshold still protects a pool that would be left with too few).
"""

from __future__ import annotations

from xds_control.config import HealthPolicy
from xds_control.discovery import Health

__all__ = ["assess_health"]


def assess_health(
    *,
    scrape_failures: int,
    up: float | None,
    error_ratio: float | None,
    policy: HealthPolicy,
) -> tuple[Health, str]:
    """Health from consecutive failed direct scrapes, Prometheus' ``up`` and the request
    error ratio (fresh values only; ``None`` when unknown), and why."""
    if scrape_failures >= policy.unhealthy_after_failures:
        return Health.UNHEALTHY, f"{scrape_failures} consecutive failed scrapes"
    if up is not None and up < 0.5:
        return Health.UNHEALTHY, "Prometheus cannot scrape it (up == 0)"
    if error_ratio is not None:
        if error_ratio >= policy.unhealthy_error_rate:
            return Health.UNHEALTHY, f"error ratio {error_ratio:.2f}"
        if error_ratio >= policy.drain_error_rate:
            return Health.DRAINING, f"error ratio {error_ratio:.2f}"
    return Health.HEALTHY, "ok"
