"""Read an engine's /metrics text (Prometheus exposition format) into signals.

Gauges become signals directly. Counters and histograms are returned raw, keyed by a short
name, so the scraper can turn two snapshots into rates (``derive``). Metric names are the real
exporters' (see ``templates.py``); a text may also carry DCGM or process metrics.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families

from xds_control.config import Engine
from xds_control.signals.sample import Adapters, Signal

__all__ = ["Snapshot", "derive", "lora_adapters", "parse_exposition"]

_Series = list[tuple[Mapping[str, str], float]]
_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape: gauge signals, raw counters (for rates), TTFT buckets (bound -> count)."""

    gauges: dict[Signal, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    ttft_buckets: dict[float, float] = field(default_factory=dict)
    ttft_seconds_per_unit: float = 1.0
    adapters: Adapters | None = None
    """The LoRA adapters (vLLM), ``observed_at`` the engine's own time of its newest series."""


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
    families = _Families.parse(text)
    prefix = _OPENAI_STYLE.get(engine)
    read = _triton(families) if prefix is None else _openai_style(families, prefix=prefix)
    return Snapshot(
        gauges=_present({**read.gauges, **_host(families)}),
        counters=_present(read.counters),
        ttft_buckets=_buckets(families.named(f"{read.ttft}_bucket")),
        ttft_seconds_per_unit=read.ttft_seconds_per_unit,
        adapters=lora_adapters(families.exactly("vllm:lora_requests_info"))
        if engine is Engine.VLLM
        else None,
    )


def _names(text: str | None) -> frozenset[str]:
    return frozenset(n.strip() for n in (text or "").split(",") if n.strip())


def lora_adapters(series: Iterable[tuple[Mapping[str, str], float]]) -> Adapters | None:
    """The LoRA adapters of vLLM's ``vllm:lora_requests_info`` samples: a gauge whose value is
    the time vLLM last logged that combination of labels (``max_lora``, and the running and
    waiting adapters, comma-separated), so each state it has been in is a series of its own
    and the newest (largest value) is the current one. ``None`` when there is none (vLLM
    writes it once LoRA is on and it has logged) or no series has a finite time and a
    positive whole ``max_lora``."""
    newest: tuple[float, Mapping[str, str]] | None = None
    for labels, value in series:
        if not math.isfinite(value) or _max_lora(labels) is None:
            continue
        if newest is None or value > newest[0]:
            newest = (value, labels)
    if newest is None:
        return None
    at, labels = newest
    return Adapters(
        running=_names(labels.get("running_lora_adapters")),
        waiting=_names(labels.get("waiting_lora_adapters")),
        max_lora=_max_lora(labels) or 0,
        observed_at=at,
    )


def _max_lora(labels: Mapping[str, str]) -> int | None:
    try:
        slots = int(labels.get("max_lora", ""))
    except ValueError:
        return None
    return slots if slots > 0 else None


class _Families:
    """A text's samples by metric name."""

    __slots__ = ("_by_name",)

    def __init__(self, by_name: dict[str, _Series]) -> None:
        self._by_name = by_name

    @classmethod
    def parse(cls, text: str) -> _Families:
        by_name: defaultdict[str, _Series] = defaultdict(list)
        try:
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    by_name[s.name].append((s.labels, float(s.value)))
        except Exception as exc:  # the parser raises bare ValueError/IndexError/KeyError on junk
            raise ValueError(f"not Prometheus exposition text: {exc}") from exc
        return cls(dict(by_name))

    def has(self, name: str) -> bool:
        return name in self._by_name

    def exactly(self, name: str) -> _Series:
        """The samples of ``name`` as written (none: empty)."""
        return self._by_name.get(name, [])

    def named(self, name: str) -> _Series:
        """The samples of ``name``, else of ``name_total``: prometheus_client's parser renames
        a counter sample without the ``_total`` suffix (Triton's
        ``nv_inference_request_success``) to ``..._total``, so either is accepted."""
        found = self._by_name.get(name)
        return found if found is not None else self.exactly(f"{name}_total")

    def total(self, name: str, **match: str) -> float | None:
        return _total(self.named(name), **match)

    def peak(self, name: str, **match: str) -> float | None:
        return _peak(self.named(name), **match)


@dataclass(frozen=True, slots=True)
class _Read:
    """What one engine's metric names gave; ``None`` where its metric was absent."""

    gauges: dict[Signal, float | None]
    counters: dict[str, float | None]
    ttft: str
    """The name of its TTFT histogram."""
    ttft_seconds_per_unit: float


_OPENAI_STYLE = {Engine.VLLM: "vllm:", Engine.SGLANG: "sglang:"}
"""The engines read in vLLM's style of names, by their prefix; every other in Triton's."""


def _openai_style(families: _Families, *, prefix: str) -> _Read:
    gauges, counters = _vllm(families) if prefix == "vllm:" else _sglang(families)
    return _Read(
        gauges=gauges,
        counters={
            **counters,
            **_decode_steps(families, prefix=prefix),
            "tokens": families.total(f"{prefix}generation_tokens_total"),
            "prompt_tokens": families.total(f"{prefix}prompt_tokens_total"),
        },
        ttft=f"{prefix}time_to_first_token_seconds",
        ttft_seconds_per_unit=1.0,
    )


def _vllm(families: _Families) -> tuple[dict[Signal, float | None], dict[str, float | None]]:
    kv_usage = families.peak("vllm:kv_cache_usage_perc")
    if kv_usage is None:  # vLLM V0's name
        kv_usage = families.peak("vllm:gpu_cache_usage_perc")
    gauges = {
        Signal.RUNNING: families.total("vllm:num_requests_running"),
        Signal.WAITING: families.total("vllm:num_requests_waiting"),
        Signal.KV_USAGE: kv_usage,
    }
    counters = {
        "prefix_hits": families.total("vllm:prefix_cache_hits_total"),
        "prefix_queries": families.total("vllm:prefix_cache_queries_total"),
    }
    return gauges, counters


def _sglang(families: _Families) -> tuple[dict[Signal, float | None], dict[str, float | None]]:
    gauges = {
        Signal.RUNNING: families.total("sglang:num_running_reqs"),
        Signal.WAITING: families.total("sglang:num_queue_reqs"),
        Signal.KV_USAGE: families.peak("sglang:token_usage"),
        Signal.PREFIX_HIT_RATIO: families.peak("sglang:cache_hit_rate"),
    }
    return gauges, {}


def _decode_steps(families: _Families, *, prefix: str) -> dict[str, float | None]:
    """The decode steps' time and count from the first histogram of the two names."""
    for itl in (f"{prefix}inter_token_latency_seconds", f"{prefix}time_per_output_token_seconds"):
        if families.has(f"{itl}_count"):
            return {
                "step_sum": _total(families.exactly(f"{itl}_sum")),
                "step_count": _total(families.exactly(f"{itl}_count")),
            }
    return {}


def _triton(families: _Families) -> _Read:
    trt = families.named("nv_trt_llm_request_metrics")
    waiting = _total(trt, request_type="waiting")
    if waiting is None:
        waiting = families.total("nv_inference_pending_request_count")
    used = families.total("nv_gpu_memory_used_bytes")
    total = families.total("nv_gpu_memory_total_bytes")
    gauges = {
        Signal.RUNNING: _total(trt, request_type="scheduled"),
        Signal.WAITING: waiting,
        Signal.BATCH_SLOTS: _peak(trt, request_type="max"),
        Signal.KV_USAGE: families.peak(
            "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="fraction"
        ),
        Signal.GPU_MEMORY_USED: used / total if used is not None and total else None,
    }
    counters = {
        # Microseconds of compute per execution, a whole request (see templates.py).
        "exec_sum": _scaled(families.total("nv_inference_compute_infer_duration_us")),
        "exec_count": families.total("nv_inference_exec_count"),
        "failures": families.total("nv_inference_request_failure"),
        "successes": families.total("nv_inference_request_success"),
        "tokens": families.total("nv_inference_count"),
    }
    return _Read(
        gauges=gauges,
        counters=counters,
        ttft="nv_inference_first_response_histogram_ms",
        ttft_seconds_per_unit=1e-3,
    )


def _host(families: _Families) -> dict[Signal, float | None]:
    """What any server's text may carry beside its engine's: DCGM's frame buffer (which wins
    over the engine's own memory reading) and the process's start."""
    host: dict[Signal, float | None] = {}
    fb_used = families.total("DCGM_FI_DEV_FB_USED")
    fb_free = families.total("DCGM_FI_DEV_FB_FREE")
    if fb_used is not None and fb_free is not None and fb_used + fb_free > 0:
        host[Signal.GPU_MEMORY_USED] = fb_used / (fb_used + fb_free)
    host[Signal.STARTED_AT] = families.peak("process_start_time_seconds")
    return host


def _buckets(series: _Series) -> dict[float, float]:
    """A histogram's samples summed per bound (``le``); a sample without a number there is
    left out."""
    buckets: defaultdict[float, float] = defaultdict(float)
    for labels, value in series:
        try:
            buckets[float(labels["le"])] += value
        except (KeyError, ValueError):
            continue
    return dict(buckets)


def _present(values: Mapping[_K, float | None]) -> dict[_K, float]:
    return {key: value for key, value in values.items() if value is not None}


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
    delta = _increments(old=old.counters, new=new.counters)
    increments = _increments(old=old.ttft_buckets, new=new.ttft_buckets)
    if delta is None or increments is None:
        return None
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
    fraction = _fraction_under(increments, ttft_slo_s / new.ttft_seconds_per_unit)
    if fraction is not None:
        out[Signal.SLO_TTFT] = fraction
    return out


def _increments(*, old: Mapping[_K, float], new: Mapping[_K, float]) -> dict[_K, float] | None:
    """Each counter's rise from ``old`` to ``new`` (one missing in ``old``: left out);
    ``None`` when one went backwards."""
    rises: dict[_K, float] = {}
    for key, value in new.items():
        before = old.get(key)
        if before is None:
            continue
        if value < before:
            return None
        rises[key] = value - before
    return rises
