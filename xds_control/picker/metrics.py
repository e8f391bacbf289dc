"""The picker's own Prometheus metrics (Envoy counts the other side: ``ext_proc.picker.*``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = ["LOAD_REPORTS", "PICKS", "PICK_SECONDS", "SERVED"]

PICKS = Counter(
    "xds_control_picker_picks_total",
    "Requests the picker answered, by pool and outcome: held (a server holding some of the "
    "prompt's blocks), moved (blocks held elsewhere, whose queue cost more than move_cost "
    "times the prefill saved), placed (no block known: the cheapest server), none (nothing "
    "to pick on: the fallback policy decides), error (a failed pick, answered as none).",
    ["pool", "outcome"],
)
SERVED = Counter(
    "xds_control_picker_served_total",
    "Picked requests whose response began, by pool and where it came from: picked (the "
    "server named first) or elsewhere (Envoy went down the fallback list or retried; the "
    "prefix index then records the server that answered).",
    ["pool", "where"],
)
LOAD_REPORTS = Counter(
    "xds_control_picker_load_reports_total",
    "Responses of pools with per_response_load that carried their server's "
    "endpoint-load-metrics header (removed before the client), by pool and outcome: read "
    "(recorded as the server's queue and KV use) or refused (a form the picker does not read).",
    ["pool", "outcome"],
)
PICK_SECONDS = Histogram(
    "xds_control_picker_pick_seconds",
    "Time inside the picker per body (parse, index, rank), without gRPC.",
    buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01),
)
