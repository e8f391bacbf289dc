"""The server's own Prometheus metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

__all__ = ["NACKS", "REQUESTS", "RESPONSES", "STREAMS"]

STREAMS = Gauge("xds_control_ads_streams", "Open ADS streams (connected Envoys).")
REQUESTS = Counter(
    "xds_control_ads_requests_total",
    "DiscoveryRequests received, by type and kind (initial, ack, nack, stale).",
    ["type", "kind"],
)
RESPONSES = Counter(
    "xds_control_ads_responses_total", "DiscoveryResponses sent, by type.", ["type"]
)
NACKS = Counter("xds_control_ads_nacks_total", "Responses rejected by Envoy, by type.", ["type"])
