"""The signal sources' own Prometheus metrics: what they asked, what failed, what was dropped."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = [
    "DATA_PATH_ENTRIES",
    "DATA_PATH_STREAMS",
    "KV_BATCHES",
    "QUERIES",
    "QUERY_SECONDS",
    "REJECTED_VALUES",
    "SCRAPES",
]

QUERIES = Counter(
    "xds_control_signal_queries_total",
    "Prometheus queries by signal and outcome (ok, timeout, http, garbage, error).",
    ["signal", "outcome"],
)
QUERY_SECONDS = Histogram(
    "xds_control_signal_query_seconds",
    "Duration of one cycle of Prometheus queries (all signals, concurrently).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
SCRAPES = Counter(
    "xds_control_signal_scrapes_total",
    "Direct /metrics scrapes by outcome (ok, timeout, http, garbage, error).",
    ["outcome"],
)
REJECTED_VALUES = Counter(
    "xds_control_signal_rejected_values_total",
    "Values dropped because they were NaN, infinite, negative or out of range.",
    ["source", "signal"],
)
DATA_PATH_ENTRIES = Counter(
    "xds_control_data_path_entries_total",
    "Envoy access-log entries received, by outcome: counted (a request that ended); running "
    "(a periodic entry of a request still open); skipped (no upstream host); dropped "
    "(finished before the window, no room for another endpoint, or the data path off); bad "
    "(could not be read).",
    ["outcome"],
)
DATA_PATH_STREAMS = Counter(
    "xds_control_data_path_streams_total",
    "Access-log streams Envoys opened to the control plane.",
)
KV_BATCHES = Counter(
    "xds_control_kv_event_batches_total",
    "KV-event batches from the servers, by outcome: applied; refused (in no layout this build "
    "decodes, skipped).",
    ["outcome"],
)
