"""PromQL per engine and for the DCGM exporter: one fleet-wide query per signal.

Every query aggregates ``by($label)``, the label that names an endpoint, so its result has one
series per endpoint however many endpoints there are; the number of queries per cycle depends
on the engines and TTFT targets in use, never on the number of endpoints.

Placeholders (``string.Template``): ``$label`` is the mapping label, ``$window`` the rate window.
Metric names are the real exporters' (vLLM ``vllm:*`` V1 names with V0 fallbacks joined by
``or``; SGLang ``sglang:*``; Triton ``nv_inference_*``, ``nv_gpu_memory_*`` and the TensorRT-LLM
backend's ``nv_trt_llm_*``; dcgm-exporter ``DCGM_FI_DEV_FB_USED``/``FB_FREE`` in MiB). See
``docs/weights.md`` for sources.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from string import Template

from xds_control.config import EndpointMapping, Engine, SignalsConfig
from xds_control.errors import ConfigError
from xds_control.signals.sample import Signal

__all__ = [
    "DCGM_TEMPLATES",
    "ENGINE_TEMPLATES",
    "TTFT_HISTOGRAMS",
    "HistogramSpec",
    "Query",
    "le_matcher",
    "render_queries",
    "slo_query",
]


def _ratio(numerator: str, denominator: str) -> str:
    return f"sum by($label)({numerator}) / sum by($label)({denominator})"


def _mean(histogram: str) -> str:
    return _ratio(f"rate({histogram}_sum[$window])", f"rate({histogram}_count[$window])")


ENGINE_TEMPLATES: Mapping[Engine, Mapping[Signal, str]] = {
    Engine.VLLM: {
        Signal.RUNNING: "sum by($label)(vllm:num_requests_running)",
        Signal.RUNNING_MEAN: "sum by($label)(avg_over_time(vllm:num_requests_running[$window]))",
        Signal.WAITING: "sum by($label)(vllm:num_requests_waiting)",
        # V1 renamed gpu_cache_usage_perc to kv_cache_usage_perc; `or` serves both versions.
        Signal.KV_USAGE: "max by($label)(vllm:kv_cache_usage_perc)"
        " or max by($label)(vllm:gpu_cache_usage_perc)",
        Signal.PREFIX_HIT_RATIO: _ratio(
            "rate(vllm:prefix_cache_hits_total[$window])",
            "rate(vllm:prefix_cache_queries_total[$window])",
        ),
        # V1's inter_token_latency replaced V0's time_per_output_token (same meaning).
        Signal.DECODE_STEP_S: f"({_mean('vllm:inter_token_latency_seconds')})"
        f" or ({_mean('vllm:time_per_output_token_seconds')})",
        # Prompt tokens prefilled (prefix-cache hits, in tokens, excluded) per output token.
        Signal.PREFILL_RATIO: "(sum by($label)(rate(vllm:prompt_tokens_total[$window]))"
        " - sum by($label)(rate(vllm:prefix_cache_hits_total[$window])))"
        " / sum by($label)(rate(vllm:generation_tokens_total[$window]))"
        " or sum by($label)(rate(vllm:prompt_tokens_total[$window]))"
        " / sum by($label)(rate(vllm:generation_tokens_total[$window]))",
        Signal.REQUEST_RATE: "sum by($label)(rate(vllm:request_success_total[$window]))",
        Signal.UP: "max by($label)(up)",
        Signal.STARTED_AT: "max by($label)(process_start_time_seconds)",
    },
    Engine.SGLANG: {
        Signal.RUNNING: "sum by($label)(sglang:num_running_reqs)",
        Signal.RUNNING_MEAN: "sum by($label)(avg_over_time(sglang:num_running_reqs[$window]))",
        Signal.WAITING: "sum by($label)(sglang:num_queue_reqs)",
        Signal.KV_USAGE: "max by($label)(sglang:token_usage)",
        Signal.PREFIX_HIT_RATIO: "max by($label)(sglang:cache_hit_rate)",
        Signal.DECODE_STEP_S: f"({_mean('sglang:inter_token_latency_seconds')})"
        f" or ({_mean('sglang:time_per_output_token_seconds')})",
        Signal.PREFILL_RATIO: "sum by($label)(rate(sglang:prompt_tokens_total[$window]))"
        " * (1 - max by($label)(sglang:cache_hit_rate))"
        " / sum by($label)(rate(sglang:generation_tokens_total[$window]))"
        " or sum by($label)(rate(sglang:prompt_tokens_total[$window]))"
        " / sum by($label)(rate(sglang:generation_tokens_total[$window]))",
        Signal.REQUEST_RATE: "sum by($label)(rate(sglang:num_requests_total[$window]))",
        Signal.UP: "max by($label)(up)",
        Signal.STARTED_AT: "max by($label)(process_start_time_seconds)",
    },
    Engine.TRITON: {
        Signal.RUNNING: 'sum by($label)(nv_trt_llm_request_metrics{request_type="scheduled"})',
        Signal.WAITING: 'sum by($label)(nv_trt_llm_request_metrics{request_type="waiting"})'
        " or sum by($label)(nv_inference_pending_request_count)",
        Signal.BATCH_SLOTS: 'max by($label)(nv_trt_llm_request_metrics{request_type="max"})',
        Signal.KV_USAGE: "max by($label)"
        '(nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"})',
        # Compute time per execution: a whole request for a generative model, so not a decode
        # step; the capacity compares it only among endpoints that report the same.
        Signal.EXEC_COMPUTE_S: "("
        + _ratio(
            "rate(nv_inference_compute_infer_duration_us[$window])",
            "rate(nv_inference_exec_count[$window])",
        )
        + ") / 1e6",
        Signal.GPU_MEMORY_USED: _ratio("nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes"),
        Signal.ERROR_RATIO: _ratio(
            "rate(nv_inference_request_failure[$window])",
            "rate(nv_inference_request_failure[$window])"
            " + rate(nv_inference_request_success[$window])",
        ),
        Signal.REQUEST_RATE: "sum by($label)(rate(nv_inference_request_success[$window])"
        " + rate(nv_inference_request_failure[$window]))",
        Signal.UP: "max by($label)(up)",
    },
}
# ONNX Runtime is served through Triton's onnxruntime backend: same exporter, same names.
ENGINE_TEMPLATES = {**ENGINE_TEMPLATES, Engine.ONNXRUNTIME: ENGINE_TEMPLATES[Engine.TRITON]}

DCGM_TEMPLATES: Mapping[Signal, str] = {
    # FB_USED and FB_FREE are MiB; summing over a server's GPUs covers tensor parallelism.
    Signal.GPU_MEMORY_USED: "sum by($label)(DCGM_FI_DEV_FB_USED)"
    " / (sum by($label)(DCGM_FI_DEV_FB_USED) + sum by($label)(DCGM_FI_DEV_FB_FREE))",
}


@dataclass(frozen=True, slots=True)
class HistogramSpec:
    """A TTFT histogram: metric name (without ``_bucket``), seconds per unit, and the upper
    bounds the exporter uses by default."""

    metric: str
    seconds_per_unit: float
    bounds: tuple[float, ...]


# vLLM's TTFT buckets (vllm/v1/metrics/loggers.py); SGLang's documented output shows the same.
_VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
              7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
# Triton's first-response histogram (decoupled models, milliseconds) default buckets.
_TRITON_TTFT = (100.0, 500.0, 2000.0, 5000.0)

TTFT_HISTOGRAMS: Mapping[Engine, HistogramSpec] = {
    Engine.VLLM: HistogramSpec("vllm:time_to_first_token_seconds", 1.0, _VLLM_TTFT),
    Engine.SGLANG: HistogramSpec("sglang:time_to_first_token_seconds", 1.0, _VLLM_TTFT),
    Engine.TRITON: HistogramSpec("nv_inference_first_response_histogram_ms", 1e-3, _TRITON_TTFT),
    Engine.ONNXRUNTIME: HistogramSpec(
        "nv_inference_first_response_histogram_ms", 1e-3, _TRITON_TTFT
    ),
}


def le_matcher(bound: float) -> str:
    """A regex matching ``bound`` however the exporter printed it (``1``, ``1.0``, ``1e+06``):
    Go clients print ``1``, Python clients ``1.0``, and Prometheus 3 normalises to floats.
    Used in a backtick (raw) PromQL string, where backslashes are not escapes."""
    forms = {repr(float(bound)), f"{bound:g}"}
    if float(bound).is_integer():
        forms |= {str(int(bound)), f"{int(bound)}.0"}
    return "|".join(sorted(re.escape(form) for form in forms))


def slo_query(*, spec: HistogramSpec, target_s: float) -> str:
    """Fraction of requests with TTFT <= ``target_s`` over the window, per endpoint.

    A histogram only knows counts at its bucket bounds. A target on a bound uses that bucket.
    A target between two bounds interpolates linearly between them, the same assumption
    ``histogram_quantile`` makes; below the first bound it interpolates from 0. A target above
    the last finite bound uses that bound, which can only under-state compliance.
    """
    target = target_s / spec.seconds_per_unit
    bounds = spec.bounds
    bucket = f"{spec.metric}_bucket"
    count = f"sum by($label)(rate({spec.metric}_count[$window]))"

    def at(bound: float) -> str:
        return f"sum by($label)(rate({bucket}{{le=~`{le_matcher(bound)}`}}[$window]))"

    index = bisect.bisect_left(bounds, target)
    if index < len(bounds) and bounds[index] == target:
        return f"{at(target)} / {count}"
    if index >= len(bounds):
        return f"{at(bounds[-1])} / {count}"
    upper = bounds[index]
    if index == 0:
        return f"({at(upper)} * {target / upper:.6g}) / {count}"
    lower = bounds[index - 1]
    share = (target - lower) / (upper - lower)
    return f"({at(lower)} + ({at(upper)} - {at(lower)}) * {share:.6g}) / {count}"


def _escape(value: str) -> str:
    # string.Template treats `$` specially; labels never contain it, but a custom one might.
    return value.replace("$", "$$")


@dataclass(frozen=True, slots=True)
class Query:
    """One rendered PromQL query and how its series map to endpoints."""

    signal: Signal
    promql: str
    mapping: EndpointMapping


def render_queries(
    *, engine: Engine, ttft_slo_s: float, config: SignalsConfig
) -> dict[Signal, Query]:
    """Every query for one (engine, TTFT target), overrides applied, placeholders filled.

    Order of precedence: ``config.templates[engine]`` (an empty string disables a signal),
    then the engine's templates, then DCGM's (when ``config.dcgm``). DCGM's queries use
    ``config.gpu_mapping``, all others ``config.endpoint_mapping``. Raises ``ConfigError`` for
    an override that names no signal or has an unknown placeholder.
    """
    templates: dict[Signal, tuple[str, EndpointMapping]] = {}
    if config.dcgm:
        templates.update({s: (q, config.gpu_mapping) for s, q in DCGM_TEMPLATES.items()})
    engine_mapping = config.endpoint_mapping
    templates.update({s: (q, engine_mapping) for s, q in ENGINE_TEMPLATES[engine].items()})
    spec = TTFT_HISTOGRAMS.get(engine)
    if spec is not None:
        templates[Signal.SLO_TTFT] = (slo_query(spec=spec, target_s=ttft_slo_s), engine_mapping)
    field = f"signals.templates.{engine.value}"
    for name, promql in config.templates.get(engine, {}).items():
        try:
            signal = Signal(name)
        except ValueError:
            known = ", ".join(s.value for s in Signal)
            raise ConfigError([(f"{field}.{name}", f"no such signal ({known})")]) from None
        if promql:
            templates[signal] = (promql, engine_mapping)
        else:
            templates.pop(signal, None)
    out: dict[Signal, Query] = {}
    for signal, (template, mapping) in templates.items():
        try:
            promql = Template(template).substitute(
                label=_escape(mapping.label), window=_escape(config.rate_window)
            )
        except (KeyError, ValueError) as exc:
            problem = f"bad placeholder {exc} (use $label, $window)"
            raise ConfigError([(f"{field}.{signal.value}", problem)]) from None
        out[signal] = Query(signal=signal, promql=promql, mapping=mapping)
    return out
