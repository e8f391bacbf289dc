"""Prometheus text exposition with the names and labels real exporters use.

One server exports its engine's family (vLLM ``vllm:*``, Triton ``nv_*``, SGLang ``sglang:*``)
plus a DCGM-exporter view of its GPU (``DCGM_FI_DEV_*``, ``gpu_metrics.py``), all on
``/metrics``, in the text format ``exposition.py`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xds_lab.sim.exposition import Exposition, labels
from xds_lab.sim.gpu_metrics import MIB, dcgm_metrics, fb_used_mib
from xds_lab.sim.profiles import Profile
from xds_lab.sim.stats import EngineStats

__all__ = ["GaugeView", "render_metrics"]


@dataclass(frozen=True, slots=True)
class GaugeView:
    """The instantaneous state of a server at scrape time."""

    server: str
    gpu_uuid: str
    running: int
    waiting: int
    kv_used_blocks: int
    kv_capacity_blocks: int
    gpu_util: float
    leaked_mib: float
    lora_series: tuple[tuple[dict[str, str], float], ...] = ()
    """``vllm:lora_requests_info``'s samples (``lora.LoraSlots.series``)."""


def _vllm(out: Exposition, profile: Profile, stats: EngineStats, view: GaugeView) -> None:
    base = {"engine": "0", "model_name": profile.model}
    lb = labels(base)
    out.metric(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [(lb, view.running)],
    )
    out.metric(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [(lb, view.waiting)],
    )
    usage = view.kv_used_blocks / view.kv_capacity_blocks
    out.metric(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [(lb, usage)],
    )
    out.metric(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        [(lb, stats.prefix_queries)],
    )
    out.metric(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        [(lb, stats.prefix_hits)],
    )
    out.metric(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [(lb, stats.prompt_tokens)],
    )
    out.metric(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        [(lb, stats.generation_tokens)],
    )
    out.metric(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        [(labels({**base, "finished_reason": "length"}), stats.requests_success)],
    )
    out.metric(
        "vllm:num_preemptions_total", "counter", "Cumulative number of preemption.", [(lb, 0)]
    )
    if view.lora_series:
        out.metric(
            "vllm:lora_requests_info",
            "gauge",
            "Running stats on lora requests.",
            [(labels(each), at) for each, at in view.lora_series],
        )
    out.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        base,
        stats.ttft,
    )
    out.histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        base,
        stats.itl,
    )
    out.histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        base,
        stats.e2e,
    )
    out.histogram(
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        base,
        stats.queue_time,
    )


def _sglang(out: Exposition, profile: Profile, stats: EngineStats, view: GaugeView) -> None:
    base = {"model_name": profile.model}
    lb = labels(base)
    used_tokens = view.kv_used_blocks * 16
    hit_rate = stats.prefix_hits / stats.prefix_queries if stats.prefix_queries else 0.0
    out.metric(
        "sglang:num_running_reqs", "gauge", "The number of running requests.", [(lb, view.running)]
    )
    out.metric(
        "sglang:num_queue_reqs",
        "gauge",
        "The number of requests in the waiting queue.",
        [(lb, view.waiting)],
    )
    out.metric("sglang:num_used_tokens", "gauge", "The number of used tokens.", [(lb, used_tokens)])
    out.metric(
        "sglang:token_usage",
        "gauge",
        "The token usage.",
        [(lb, view.kv_used_blocks / view.kv_capacity_blocks)],
    )
    out.metric("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", [(lb, hit_rate)])
    out.metric(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [(lb, stats.prompt_tokens)],
    )
    out.metric(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        [(lb, stats.generation_tokens)],
    )
    out.metric(
        "sglang:cached_tokens_total",
        "counter",
        "Number of cached prompt tokens.",
        [(lb, stats.prefix_hits)],
    )
    out.metric(
        "sglang:num_requests_total",
        "counter",
        "Number of requests processed.",
        [(lb, stats.requests_success)],
    )
    out.histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        base,
        stats.ttft,
    )
    out.histogram(
        "sglang:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        base,
        stats.itl,
    )
    out.histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        base,
        stats.e2e,
    )


def _triton(out: Exposition, profile: Profile, stats: EngineStats, view: GaugeView) -> None:
    base = {"model": "llama-3.1-8b", "version": "1"}
    lb = labels(base)
    out.metric(
        "nv_inference_request_success",
        "counter",
        "Number of successful inference requests, all batch sizes",
        [(lb, stats.requests_success)],
    )
    failures = [
        (labels({**base, "reason": "REJECTED"}), stats.requests_rejected),
        (labels({**base, "reason": "BACKEND"}), stats.requests_failed),
    ]
    out.metric(
        "nv_inference_request_failure",
        "counter",
        "Number of failed inference requests, all batch sizes",
        failures,
    )
    out.metric(
        "nv_inference_count",
        "counter",
        "Number of inferences performed (does not include cached requests)",
        [(lb, stats.requests_success)],
    )
    out.metric(
        "nv_inference_exec_count",
        "counter",
        "Number of model executions performed (does not include cached requests)",
        [(lb, stats.requests_success)],
    )
    out.metric(
        "nv_inference_request_duration_us",
        "counter",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        [(lb, round(stats.e2e.sum * 1e6))],
    )
    out.metric(
        "nv_inference_queue_duration_us",
        "counter",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        [(lb, round(stats.queue_time.sum * 1e6))],
    )
    out.metric(
        "nv_inference_compute_infer_duration_us",
        "counter",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
        [(lb, round(stats.compute_seconds * 1e6))],
    )
    out.metric(
        "nv_inference_pending_request_count",
        "gauge",
        "Instantaneous number of pending requests awaiting execution per-model.",
        [(lb, view.waiting)],
    )
    gpu = labels({"gpu_uuid": view.gpu_uuid})
    out.metric(
        "nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0)", [(gpu, view.gpu_util)]
    )
    out.metric(
        "nv_gpu_memory_total_bytes",
        "gauge",
        "GPU total memory, in bytes",
        [(gpu, profile.gpu_memory_mib * MIB)],
    )
    out.metric(
        "nv_gpu_memory_used_bytes",
        "gauge",
        "GPU used memory, in bytes",
        [(gpu, round(_fb_used_mib(profile, view) * MIB))],
    )
    if profile.engine != "triton":
        return
    # The TensorRT-LLM backend's own gauges: batch and KV-cache block state.
    trt = {"model": "tensorrt_llm", "version": "1"}
    requests = [
        ("active", view.running),
        ("max", profile.max_num_seqs),
        ("scheduled", view.running),
        ("waiting", view.waiting),
    ]
    out.metric(
        "nv_trt_llm_request_metrics",
        "gauge",
        "TRT LLM request metrics",
        [(labels({**trt, "request_type": k}), v) for k, v in requests],
    )
    blocks = [
        ("max", view.kv_capacity_blocks),
        ("free", view.kv_capacity_blocks - view.kv_used_blocks),
        ("used", view.kv_used_blocks),
        ("tokens_per", 16),
        # Recent TensorRT-LLM backends also export the used share, which the engine reads.
        ("fraction", view.kv_used_blocks / max(1, view.kv_capacity_blocks)),
    ]
    out.metric(
        "nv_trt_llm_kv_cache_block_metrics",
        "gauge",
        "TRT LLM KV cache block metrics",
        [(labels({**trt, "kv_cache_block_type": k}), v) for k, v in blocks],
    )


def _fb_used_mib(profile: Profile, view: GaugeView) -> float:
    return fb_used_mib(profile, kv_used_blocks=view.kv_used_blocks, leaked_mib=view.leaked_mib)


def render_metrics(profile: Profile, stats: EngineStats, view: GaugeView) -> str:
    """The full ``/metrics`` body for one server."""
    out = Exposition()
    if profile.metrics == "vllm":
        _vllm(out, profile, stats, view)
    elif profile.metrics == "sglang":
        _sglang(out, profile, stats, view)
    else:
        _triton(out, profile, stats, view)
    if (
        profile.metrics != "triton"
    ):  # vLLM and SGLang are Python: prometheus_client's process collector
        out.metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            [("", stats.started_at)],
        )
    dcgm_metrics(
        out,
        profile,
        hostname=view.server,
        gpu_uuid=view.gpu_uuid,
        util=view.gpu_util,
        used_mib=_fb_used_mib(profile, view),
    )
    return out.text()
