"""The flow controller's Prometheus metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "FLOW_CHECK_SECONDS",
    "FLOW_OUTCOMES",
    "FLOW_QUEUED",
    "FLOW_WAIT_SECONDS",
    "OUTPUT_TOKENS",
]

FLOW_QUEUED = Gauge(
    "xds_control_flow_queued",
    "Requests the picker holds now, by pool and priority band (waiting for a server with "
    "room; a pool scaling from zero shows its demand here).",
    ["pool", "band"],
)
FLOW_OUTCOMES = Counter(
    "xds_control_flow_held_total",
    "Requests flow control held or refused, by pool and how it ended: dispatched, "
    "queue-full (429 at once), token-budget (429 at once: over its tenant's output-token "
    "budget), max-wait (429 after the pool's max_wait_s), no-ready-endpoint (503 after it), "
    "cancelled (the client or Envoy left).",
    ["pool", "outcome"],
)
FLOW_WAIT_SECONDS = Histogram(
    "xds_control_flow_wait_seconds",
    "How long dispatched requests were held.",
    ["pool"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
OUTPUT_TOKENS = Counter(
    "xds_control_flow_output_tokens_total",
    "Output tokens the responses of budgeted requests reported (their usage), by pool and "
    "budget (TENANT/BAND).",
    ["pool", "budget"],
)
FLOW_CHECK_SECONDS = Histogram(
    "xds_control_flow_check_seconds",
    "Time flow control spends on a request in the picker's process, by phase: admit (the "
    "budget's charge and the saturation check when the body arrives), release (a server "
    "answered: the next held request may go) and end (the stream closed). On the hold-free "
    "path this is all it adds to a request: it sends Envoy no message of its own.",
    ["phase"],
    buckets=(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01),
)
