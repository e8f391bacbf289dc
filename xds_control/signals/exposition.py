"""Read an engine's /metrics text (Prometheus exposition format) into signals.

Gauges become signals directly. Counters and histograms are returned raw, keyed by a short
name, so the scraper can turn two snapshots into rates (``derive``). Metric names are the real
exporters' (see ``templates.py``); a text may also carry DCGM or process metrics.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from xds_control.config import Engine
from xds_control.signals.sample import Signal

__all__ = ["Snapshot", "derive", "parse_exposition"]

_Series = list[tuple[Mapping[str, str], float]]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape: gauge signals, raw counters (for rates), TTFT buckets (bound -> count)."""

    gauges: dict[Signal, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    ttft_buckets: dict[float, float] = field(default_factory=dict)
    ttft_seconds_per_unit: float = 1.0


def _total(series: _Series, **match: str) -> float | None:
    values = [v for labels, v in series if all(labels.get(k) == m for k, m in match.items())]
    return _sum(values) if values else None


def _sum(values: list[float]) -> float:
    # fsum raises on what a broken exporter can send (+Inf and -Inf together, or finite
    # values whose sum overflows); the plain sum gives NaN or inf, which the sample rejects.
    try:
        return math.fsum(values)
    except (OverflowError, ValueError):
        return sum(values)


def _peak(series: _Series, **match: str) -> float | None:
    values = [v for labels, v in series if all(labels.get(k) == m for k, m in match.items())]
    return max(values) if values else None


def parse_exposition(text: str, *, engine: Engine) -> Snapshot:
    """Parse exposition ``text`` from an ``engine`` server; ``ValueError`` if it is not
    exposition format."""
    by_name: defaultdict[str, _Series] = defaultdict(list)
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                by_name[s.name].append((s.labels, float(s.value)))
    except Exception as exc:  # the parser raises bare ValueError/IndexError/KeyError on junk
        raise ValueError(f"not Prometheus exposition text: {exc}") from exc

    def g(name: str, default: _Series) -> _Series:
        # prometheus_client's parser renames a counter sample without the `_total` suffix
        # (Triton's `nv_inference_request_success`) to `..._total`; accept both.
        found = by_name.get(name)
        if found is None:
            found = by_name.get(f"{name}_total", default)
        return found

    gauges: dict[Signal, float] = {}
    counters: dict[str, float] = {}

    def put(signal: Signal, value: float | None) -> None:
        if value is not None:
            gauges[signal] = value

    def count(key: str, value: float | None) -> None:
        if value is not None:
            counters[key] = value

    empty: _Series = []
    if engine in (Engine.VLLM, Engine.SGLANG):
        p = "vllm:" if engine is Engine.VLLM else "sglang:"
        if engine is Engine.VLLM:
            put(Signal.RUNNING, _total(g("vllm:num_requests_running", empty)))
            put(Signal.WAITING, _total(g("vllm:num_requests_waiting", empty)))
            kv_usage = _peak(g("vllm:kv_cache_usage_perc", empty))
            if kv_usage is None:  # vLLM V0's name
                kv_usage = _peak(g("vllm:gpu_cache_usage_perc", empty))
            put(Signal.KV_USAGE, kv_usage)
            count("prefix_hits", _total(g("vllm:prefix_cache_hits_total", empty)))
            count("prefix_queries", _total(g("vllm:prefix_cache_queries_total", empty)))
        else:
            put(Signal.RUNNING, _total(g("sglang:num_running_reqs", empty)))
            put(Signal.WAITING, _total(g("sglang:num_queue_reqs", empty)))
            put(Signal.KV_USAGE, _peak(g("sglang:token_usage", empty)))
            put(Signal.PREFIX_HIT_RATIO, _peak(g("sglang:cache_hit_rate", empty)))
        for itl in (f"{p}inter_token_latency_seconds", f"{p}time_per_output_token_seconds"):
            if f"{itl}_count" in by_name:
                count("step_sum", _total(by_name[f"{itl}_sum"]))
                count("step_count", _total(by_name[f"{itl}_count"]))
                break
        ttft, unit = f"{p}time_to_first_token_seconds", 1.0
        count("tokens", _total(g(f"{p}generation_tokens_total", empty)))
        count("prompt_tokens", _total(g(f"{p}prompt_tokens_total", empty)))
    else:
        trt = g("nv_trt_llm_request_metrics", empty)
        put(Signal.RUNNING, _total(trt, request_type="scheduled"))
        waiting = _total(trt, request_type="waiting")
        if waiting is None:
            waiting = _total(g("nv_inference_pending_request_count", empty))
        put(Signal.WAITING, waiting)
        put(Signal.BATCH_SLOTS, _peak(trt, request_type="max"))
        kv = g("nv_trt_llm_kv_cache_block_metrics", empty)
        put(Signal.KV_USAGE, _peak(kv, kv_cache_block_type="fraction"))
        used = _total(g("nv_gpu_memory_used_bytes", empty))
        total = _total(g("nv_gpu_memory_total_bytes", empty))
        if used is not None and total:
            gauges[Signal.GPU_MEMORY_USED] = used / total
        # Microseconds of compute per execution, a whole request (see templates.py).
        count("exec_sum", _scaled(_total(g("nv_inference_compute_infer_duration_us", empty))))
        count("exec_count", _total(g("nv_inference_exec_count", empty)))
        count("failures", _total(g("nv_inference_request_failure", empty)))
        count("successes", _total(g("nv_inference_request_success", empty)))
        count("tokens", _total(g("nv_inference_count", empty)))
        ttft, unit = "nv_inference_first_response_histogram_ms", 1e-3
    fb_used = _total(g("DCGM_FI_DEV_FB_USED", empty))
    fb_free = _total(g("DCGM_FI_DEV_FB_FREE", empty))
    if fb_used is not None and fb_free is not None and fb_used + fb_free > 0:
        gauges[Signal.GPU_MEMORY_USED] = fb_used / (fb_used + fb_free)
    put(Signal.STARTED_AT, _peak(g("process_start_time_seconds", empty)))
    buckets: defaultdict[float, float] = defaultdict(float)
    for labels, value in g(f"{ttft}_bucket", empty):
        try:
            buckets[float(labels["le"])] += value
        except (KeyError, ValueError):
            continue
    return Snapshot(
        gauges=gauges, counters=counters, ttft_buckets=dict(buckets), ttft_seconds_per_unit=unit
    )


def _scaled(value: float | None) -> float | None:
    return None if value is None else value / 1e6


def _fraction_under(buckets: Mapping[float, float], target: float) -> float | None:
    """Share of observations <= ``target`` from cumulative bucket increments (interpolating
    linearly inside a bucket, as ``templates.slo_query`` does)."""
    total = buckets.get(math.inf)
    if not total or total <= 0:
        return None
    lower, below = 0.0, 0.0
    for bound in sorted(buckets):
        count = buckets[bound]
        if bound >= target:
            if math.isinf(bound):
                return below / total
            share = (target - lower) / (bound - lower) if bound > lower else 1.0
            return (below + (count - below) * share) / total
        lower, below = bound, count
    return below / total


def derive(*, old: Snapshot, new: Snapshot, ttft_slo_s: float) -> dict[Signal, float] | None:
    """Rate-based signals from two snapshots of one server; ``None`` when a counter went
    backwards (the server restarted: the caller treats that as a restart)."""
    delta: dict[str, float] = {}
    for key, value in new.counters.items():
        before = old.counters.get(key)
        if before is None:
            continue
        if value < before:
            return None
        delta[key] = value - before
    out: dict[Signal, float] = {}
    if delta.get("step_count"):
        out[Signal.DECODE_STEP_S] = delta.get("step_sum", math.nan) / delta["step_count"]
    if delta.get("exec_count"):
        out[Signal.EXEC_COMPUTE_S] = delta.get("exec_sum", math.nan) / delta["exec_count"]
    if delta.get("prefix_queries"):
        out[Signal.PREFIX_HIT_RATIO] = delta.get("prefix_hits", math.nan) / delta["prefix_queries"]
    if delta.get("tokens") and "prompt_tokens" in delta:
        prefilled = delta["prompt_tokens"] - delta.get("prefix_hits", 0.0)
        hit_ratio = new.gauges.get(Signal.PREFIX_HIT_RATIO)  # SGLang's: a ratio, not counters
        if hit_ratio is not None:
            prefilled *= 1.0 - hit_ratio
        out[Signal.PREFILL_RATIO] = max(0.0, prefilled) / delta["tokens"]
    finished = delta.get("failures", 0.0) + delta.get("successes", 0.0)
    if finished > 0 and "failures" in delta:
        out[Signal.ERROR_RATIO] = delta["failures"] / finished
    increments: dict[float, float] = {}
    for bound, value in new.ttft_buckets.items():
        before = old.ttft_buckets.get(bound)
        if before is None:
            continue
        if value < before:
            return None
        increments[bound] = value - before
    fraction = _fraction_under(increments, ttft_slo_s / new.ttft_seconds_per_unit)
    if fraction is not None:
        out[Signal.SLO_TTFT] = fraction
    return out
