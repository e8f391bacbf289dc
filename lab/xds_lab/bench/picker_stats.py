"""What the per-request picker did during one benchmark point: its own pick-time histogram and
outcomes (the control plane's ``/metrics``), and Envoy's ``ext_proc`` counters.

``xds_control_picker_pick_seconds`` times the work inside the picker per body (parse, index,
rank), without gRPC or Envoy's side: the p50/p99 here are that, read from the histogram's
buckets as Prometheus' ``histogram_quantile`` does (linear within a bucket; above the last
finite bucket, that bucket's bound, reported as "at least"). The gRPC round trips are counted
by ``bench/picker_latency.py``, end to end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["PickerSnapshot", "delta", "histogram_quantile", "picker_lines", "snapshot"]

PickerSnapshot = dict[str, Any]
"""``buckets`` (upper bound -> cumulative count), ``picks`` (outcome -> count), ``envoy``."""

_HISTOGRAM = "xds_control_picker_pick_seconds"
_PICKS = "xds_control_picker_picks"
_ENVOY = ("streams_started", "failure_mode_allowed", "message_timeouts", "stream_msgs_received")


def snapshot(*, metrics_text: str, envoy_stats: Mapping[str, int]) -> PickerSnapshot:
    """The picker's counters now, from the control plane's ``/metrics`` and Envoy's stats."""
    buckets: dict[float, float] = {}
    picks: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == _HISTOGRAM + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name == _PICKS + "_total":
                outcome = sample.labels.get("outcome", "")
                picks[outcome] = picks.get(outcome, 0.0) + sample.value
    envoy = {
        key: sum(v for name, v in envoy_stats.items() if name.endswith(f".ext_proc.picker.{key}"))
        for key in _ENVOY
    }
    return {"buckets": buckets, "picks": picks, "envoy": envoy}


def _minus(after: Mapping[Any, float], before: Mapping[Any, float]) -> dict[Any, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float:
    """The ``q`` quantile of cumulative ``buckets`` (bound -> count, ``inf`` included); NaN
    without observations. Above the last finite bound: that bound (a lower bound)."""
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower
            share = (rank - below) / (count - below) if count > below else 1.0
            return lower + (bound - lower) * share
        lower, below = bound, count
    return lower


def delta(before: PickerSnapshot, after: PickerSnapshot) -> dict[str, Any]:
    """The point's picks, pick-time p50/p99 (seconds) and Envoy's ext_proc counters."""
    buckets = _minus(after["buckets"], before["buckets"])
    last_finite = max((b for b in buckets if not math.isinf(b)), default=math.nan)
    p99 = histogram_quantile(0.99, buckets)
    return {
        "picks": {k: round(v) for k, v in _minus(after["picks"], before["picks"]).items()},
        "pick_p50_s": histogram_quantile(0.5, buckets),
        "pick_p99_s": p99,
        "pick_p99_at_least": p99 >= last_finite,
        "observations": round(buckets.get(math.inf, 0.0)),
        "envoy": {k: round(v) for k, v in _minus(after["envoy"], before["envoy"]).items()},
    }


def picker_lines(result: Mapping[str, Any]) -> list[str]:
    """A Markdown list for the summary: per picker point, picks, pick time, Envoy's counts."""
    lines = []
    for p in result["points"]:
        stats = p.get("picker")
        if stats is None:
            continue
        at_least = ">= " if stats["pick_p99_at_least"] else ""
        env = stats["envoy"]
        lines.append(
            f"- `{p['policy']}` {p['load']:.0%} seed {p['seed_index']}: "
            f"{p['requests']} requests, picks {stats['picks']}; time in the picker p50 "
            f"{stats['pick_p50_s'] * 1e3:.3f} ms, p99 {at_least}{stats['pick_p99_s'] * 1e3:.3f} ms "
            f"({stats['observations']} bodies); Envoy ext_proc streams "
            f"{env['streams_started']}, failed open {env['failure_mode_allowed']}, "
            f"timeouts {env['message_timeouts']}" + (" (lag-flagged)" if p.get("lag_flag") else "")
        )
    if not lines:
        return []
    return ["### Picker (" + str(result["scenario"]["name"]) + ")", "", *lines, ""]
