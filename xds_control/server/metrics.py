"""The server's own Prometheus metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["GROUP_STREAMS", "NACKS", "PUSH_ACK_SECONDS", "REQUESTS", "RESPONSES", "STREAMS"]

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
GROUP_STREAMS = Gauge(
    "xds_control_connected_streams",
    "Open ADS streams by node group, counted at each scrape.",
    ["group"],
)
PUSH_ACK_SECONDS = Histogram(
    "xds_control_push_ack_seconds",
    "From a snapshot's publish (or the stream's connect, if later) to Envoy's ACK of the "
    "version it serves, by type: how long a change takes to be running in Envoy.",
    ["type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
