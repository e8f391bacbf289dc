"""Server profiles: an engine type on a GPU class, with its speed, batch slots and KV capacity.

Every profile serves the same model (Llama-3.1-8B-Instruct) so a fleet can be one pool. The
baseline, vLLM on an H100, is calibrated from public figures (see ``docs/simulator.md``):
prefill costs 30 ms of fixed overhead plus 0.2 ms per uncached prompt token (about 80 ms TTFT at
256 prompt tokens) and a decode step costs 10 ms plus 0.08 ms per running sequence (10-15 ms per
output token at moderate batch). Other GPUs and engines scale those times by factors; KV capacity
follows from GPU memory, weight size and KV bytes per token.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

__all__ = [
    "ENGINES",
    "GPUS",
    "PROFILES",
    "EngineClass",
    "GpuClass",
    "Profile",
    "get_profile",
    "read_as",
]

_MIB = 1024 * 1024
_BLOCK_TOKENS = 16
# Llama-3.1-8B: 2 (K and V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes (fp16).
_KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
_WEIGHTS_FP16 = 16_060_000_000
_WEIGHTS_FP8 = 8_030_000_000
# vLLM's default gpu_memory_utilization; the rest of the budget after weights and activations is KV.
_GPU_MEMORY_UTILIZATION = 0.9
_ACTIVATION_RESERVE = 2 * 1024**3


@dataclass(frozen=True, slots=True)
class GpuClass:
    """A GPU model: memory, DCGM name and how much slower than an H100 it prefills and decodes."""

    name: str
    dcgm_name: str
    memory_mib: int
    weights_bytes: int
    prefill_factor: float
    decode_factor: float


NO_METRICS = "none"
"""A profile's ``metrics`` for a server with no metrics endpoint at all (``/metrics`` is 404),
as a server behind a proxy or an engine that exports none: only the data path sees it."""


@dataclass(frozen=True, slots=True)
class EngineClass:
    """An inference engine: which metrics it exports, its batch limits, and its queue behaviour."""

    name: str
    metrics: str
    speed_factor: float
    max_num_seqs: int
    max_waiting: int
    full_queue_status: int
    prefix_caching: bool


# Decode is memory-bandwidth bound (H100 SXM 3.35 TB/s, A100 80GB 2.0 TB/s, A10G 0.6 TB/s,
# L4 0.3 TB/s) and prefill compute bound; per-step fixed costs narrow the raw ratios. The L4 and
# A10G cannot hold fp16 weights plus a useful KV cache in 24 GB, so they serve 8-bit weights.
GPUS: dict[str, GpuClass] = {
    "h100": GpuClass("h100", "NVIDIA H100 80GB HBM3", 81559, _WEIGHTS_FP16, 1.0, 1.0),
    "a100": GpuClass("a100", "NVIDIA A100-SXM4-80GB", 81920, _WEIGHTS_FP16, 2.2, 1.8),
    "a10g": GpuClass("a10g", "NVIDIA A10G", 23028, _WEIGHTS_FP8, 3.5, 3.0),
    "l4": GpuClass("l4", "NVIDIA L4", 23034, _WEIGHTS_FP8, 4.0, 3.5),
}

# ONNX Runtime is served through Triton's onnxruntime backend, so it exports Triton's metrics; it
# has no paged KV cache or prefix reuse, and half the batch slots. Queue-full answers: vLLM and
# SGLang shed with 429; Triton's queue policy rejects with UNAVAILABLE, which is HTTP 503.
ENGINES: dict[str, EngineClass] = {
    "vllm": EngineClass("vllm", "vllm", 1.0, 256, 1024, 429, True),
    "sglang": EngineClass("sglang", "sglang", 0.95, 256, 1024, 429, True),
    "triton": EngineClass("triton", "triton", 0.9, 256, 512, 503, True),
    "onnxruntime": EngineClass("onnxruntime", "triton", 1.5, 128, 256, 503, False),
}


@dataclass(frozen=True, slots=True)
class Profile:
    """Everything the scheduler, KV cache and metrics need to behave like one server."""

    name: str
    engine: str
    metrics: str
    gpu: str
    gpu_dcgm_name: str
    model: str
    prefill_overhead_s: float
    prefill_per_token_s: float
    decode_base_s: float
    decode_per_seq_s: float
    max_num_seqs: int
    max_waiting: int
    max_prefill_tokens: int
    full_queue_status: int
    prefix_caching: bool
    kv_blocks: int
    kv_bytes_per_token: int
    weights_bytes: int
    gpu_memory_mib: int
    max_model_len: int
    jitter: float
    lenient_body: bool = False
    max_loras: int = 0
    """LoRA adapter slots (vLLM's ``--max-loras``); 0: LoRA off, ``model`` is not read."""
    lora_load_s: float = 0.1
    """Seconds an adapter's load adds to the step that admits its request."""
    """Serve a body that is not a completion request (its text as the prompt) instead of a 400."""

    def prefill_time(self, uncached_tokens: int) -> float:
        """Seconds one prefill pass takes for ``uncached_tokens`` prompt tokens (no jitter)."""
        return self.prefill_overhead_s + uncached_tokens * self.prefill_per_token_s

    def decode_time(self, batch: int) -> float:
        """Seconds one decode step takes with ``batch`` running sequences (no jitter)."""
        return self.decode_base_s + batch * self.decode_per_seq_s

    def scaled(self, time_scale: float) -> Profile:
        """The same profile with every duration multiplied by ``time_scale`` (tests use < 1)."""
        return dataclasses.replace(
            self,
            prefill_overhead_s=self.prefill_overhead_s * time_scale,
            prefill_per_token_s=self.prefill_per_token_s * time_scale,
            decode_base_s=self.decode_base_s * time_scale,
            decode_per_seq_s=self.decode_per_seq_s * time_scale,
        )


def _kv_blocks(gpu: GpuClass) -> int:
    budget = gpu.memory_mib * _MIB * _GPU_MEMORY_UTILIZATION - gpu.weights_bytes
    return max(64, math.floor((budget - _ACTIVATION_RESERVE) / (_KV_BYTES_PER_TOKEN * 16)))


def _build(engine: EngineClass, gpu: GpuClass) -> Profile:
    slots = engine.max_num_seqs if gpu.memory_mib > 40000 else engine.max_num_seqs // 2
    return Profile(
        name=f"{engine.name}-{gpu.name}",
        engine=engine.name,
        metrics=engine.metrics,
        gpu=gpu.name,
        gpu_dcgm_name=gpu.dcgm_name,
        model="meta-llama/Llama-3.1-8B-Instruct",
        prefill_overhead_s=0.030 * engine.speed_factor * gpu.prefill_factor,
        prefill_per_token_s=0.0002 * engine.speed_factor * gpu.prefill_factor,
        decode_base_s=0.010 * engine.speed_factor * gpu.decode_factor,
        decode_per_seq_s=0.00008 * engine.speed_factor * gpu.decode_factor,
        max_num_seqs=slots,
        max_waiting=engine.max_waiting,
        max_prefill_tokens=8192,
        full_queue_status=engine.full_queue_status,
        prefix_caching=engine.prefix_caching,
        kv_blocks=_kv_blocks(gpu),
        kv_bytes_per_token=_KV_BYTES_PER_TOKEN,
        weights_bytes=gpu.weights_bytes,
        gpu_memory_mib=gpu.memory_mib,
        max_model_len=32768,
        jitter=0.1,
    )


PROFILES: dict[str, Profile] = {
    f"{e}-{g}": _build(ENGINES[e], GPUS[g]) for e in ENGINES for g in GPUS
}


def get_profile(name: str, **overrides: object) -> Profile:
    """The named profile with ``overrides`` applied; raises ``KeyError`` naming what is unknown."""
    if name not in PROFILES:
        raise KeyError(f"unknown profile {name!r}; known: {', '.join(sorted(PROFILES))}")
    fields = {f.name for f in dataclasses.fields(Profile)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise KeyError(f"unknown profile field(s) {', '.join(unknown)}")
    profile = dataclasses.replace(PROFILES[name], **overrides)  # type: ignore[arg-type]
    if profile.metrics not in {*(e.metrics for e in ENGINES.values()), NO_METRICS}:
        raise ValueError(f"unknown metrics {profile.metrics!r}")
    if not 0.0 <= profile.jitter <= 0.3:
        raise ValueError(f"jitter must be within [0, 0.3], got {profile.jitter}")
    return profile


def read_as(profile: Profile) -> str:
    """The engine a control plane reads this server as (the config's ``engine`` value): its own
    when it exports its engine's names (ONNX Runtime's are Triton's), else the engine whose
    names it exports (an ``overrides: {metrics: vllm}`` server is read as vLLM)."""
    if profile.metrics == NO_METRICS or ENGINES[profile.engine].metrics == profile.metrics:
        return profile.engine
    return profile.metrics
