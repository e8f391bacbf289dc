"""The health an endpoint is published with, in Envoy's EDS terms.

One word for the whole pipeline: discovery may know it (a terminating pod drains), the engine
decides it from signals (failing scrapes, error ratio), and the EDS builder publishes it.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Health"]


class Health(StrEnum):
    """EDS health status (Envoy's names). An endpoint that should get no traffic is marked
    DRAINING or UNHEALTHY, never given weight 0: Envoy rejects weight 0."""

    HEALTHY = "HEALTHY"
    DRAINING = "DRAINING"
    UNHEALTHY = "UNHEALTHY"
