"""Whether an endpoint takes new requests: failing ones are marked, never weighted 0.

Envoy keeps DRAINING and UNHEALTHY endpoints in the assignment but sends them no new
requests (its panic threshold still protects a pool that would be left with too few).
"""

from __future__ import annotations

from xds_control.config import HealthPolicy
from xds_control.discovery import Health
from xds_control.engine.columns import or_none, rows
from xds_control.engine.inputs import Inputs
from xds_control.signals import Signal

__all__ = ["assess_health", "assess_pool_health"]

# Prometheus' ``up`` is 0 or 1; below a half it failed to scrape the endpoint.
_UP = 0.5


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
    if up is not None and up < _UP:
        return Health.UNHEALTHY, "Prometheus cannot scrape it (up == 0)"
    if error_ratio is not None:
        if error_ratio >= policy.unhealthy_error_rate:
            return Health.UNHEALTHY, f"error ratio {error_ratio:.2f}"
        if error_ratio >= policy.drain_error_rate:
            return Health.DRAINING, f"error ratio {error_ratio:.2f}"
    return Health.HEALTHY, "ok"


def assess_pool_health(inputs: Inputs, policy: HealthPolicy) -> tuple[list[Health], list[str]]:
    """Every endpoint's health and why, in row order.

    Most endpoints are healthy with nothing to report; ``assess_health`` runs only for those
    with a failed scrape, ``up`` of 0 or errors at the draining rate, the only inputs that
    can make it say anything but healthy.
    """
    up = inputs.signal(Signal.UP)
    errors = inputs.signal(Signal.ERROR_RATIO)
    health = [Health.HEALTHY] * len(inputs.addresses)
    reasons = ["ok"] * len(inputs.addresses)
    suspect = (inputs.failures > 0) | (up < _UP) | (errors >= policy.drain_error_rate)
    for row in rows(suspect):
        sample = inputs.samples[row]
        health[row], reasons[row] = assess_health(
            scrape_failures=sample.scrape_failures if sample is not None else 0,
            up=or_none(up[row]),
            error_ratio=or_none(errors[row]),
            policy=policy,
        )
    return health, reasons
