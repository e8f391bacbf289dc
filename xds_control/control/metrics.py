"""The control loop's own Prometheus metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Info

__all__ = [
    "CONFIG_RELOADS",
    "DISCOVERY_ERRORS",
    "ENDPOINT_WEIGHT",
    "ENDPOINT_WEIGHT_FACTOR",
    "EVENT_LOOP_TASKS",
    "LAST_PUBLISH",
    "LOOP_ERRORS",
    "POOL_RECOMMENDED_REPLICAS",
    "SIGNAL_AGE",
    "SNAPSHOTS_PUBLISHED",
    "SNAPSHOT_INFO",
]

CONFIG_RELOADS = Counter(
    "xds_control_config_reloads_total", "Config file loads, by result (ok, rejected).", ["result"]
)
DISCOVERY_ERRORS = Counter(
    "xds_control_discovery_errors_total", "Endpoint source failures, by pool.", ["pool"]
)
SNAPSHOTS_PUBLISHED = Counter(
    "xds_control_snapshots_published_total", "Snapshots published with a new version."
)
SNAPSHOT_INFO = Info("xds_control_snapshot", "The version currently served.")
LAST_PUBLISH = Gauge(
    "xds_control_snapshot_published_timestamp_seconds", "When the current snapshot was published."
)
LOOP_ERRORS = Counter(
    "xds_control_loop_errors_total",
    "Unexpected errors in a control-loop phase (config, endpoints, weights, publish, state, "
    "scrape); the phase's last good result is kept.",
    ["phase"],
)
EVENT_LOOP_TASKS = Gauge(
    "xds_control_event_loop_tasks",
    "asyncio tasks alive in the serving process, counted at each scrape: a count that grows "
    "with stream churn is a leak.",
)
ENDPOINT_WEIGHT = Gauge(
    "xds_control_endpoint_weight",
    "The weight the engine decided for an endpoint (what EDS serves), set at each scrape; an "
    "endpoint that left has no series.",
    ["pool", "endpoint"],
)
ENDPOINT_WEIGHT_FACTOR = Gauge(
    "xds_control_endpoint_weight_factor",
    "Each factor the engine multiplied into an endpoint's score (docs/weights.md), set at each "
    "scrape.",
    ["pool", "endpoint", "factor"],
)
SIGNAL_AGE = Gauge(
    "xds_control_signal_age_seconds",
    "Age at scrape time of each signal reading behind an endpoint's weight; a growing age "
    "means a stale source (weights hold, then decay past the TTL).",
    ["pool", "endpoint", "signal"],
)
POOL_RECOMMENDED_REPLICAS = Gauge(
    "xds_control_pool_recommended_replicas",
    "Replicas the pool should have (docs/autoscaling.md), for an HPA or KEDA to follow; only "
    "pools with autoscale.enabled have a series. Set at each scrape.",
    ["pool"],
)
