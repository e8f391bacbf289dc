"""A pool's autoscaling recommendation: thresholds, stabilisation windows and limits.

The control plane does not scale anything itself. It recommends a replica count per pool and
exports it (``xds_control_pool_recommended_replicas``) for an HPA or KEDA to act on; these
settings shape that number. Off by default: a pool without them exports nothing.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from xds_control.config.strict import StrictModel

__all__ = ["AutoscalePolicy"]


class AutoscalePolicy(StrictModel):
    """When a pool needs more or fewer replicas, and how fast the answer may move."""

    enabled: bool = Field(
        default=False,
        description="Compute and export a replica recommendation for this pool (needs the "
        "weight engine, i.e. a signal source); off: no series is exported.",
    )
    qps_per_replica: float = Field(
        default=10.0,
        gt=0,
        description="Requests per second one replica should serve; the pool's total request "
        "rate over this is the replica count the load calls for. Measure it with the load "
        "generator: the rate at which one replica still meets its TTFT target.",
    )
    gpu_memory_target: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Mean GPU memory use (0..1) the replicas should stay under. Above vLLM's "
        "default preallocation (gpu_memory_utilization 0.9), which DCGM reports whatever the "
        "load; lower it for engines that allocate on demand (Triton, ONNX Runtime).",
    )
    tolerance: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="A request rate within this fraction of what the current replicas serve "
        "changes nothing (the HPA's default 10%), so noise does not move the recommendation.",
    )
    scale_up_window_s: float = Field(
        default=30.0,
        ge=0,
        description="Scale out only to the lowest count called for during this window: a "
        "short burst does not add replicas that take minutes to load a model.",
    )
    scale_down_window_s: float = Field(
        default=300.0,
        ge=0,
        description="Scale in only to the highest count called for during this window (the "
        "HPA's default 5 minutes): a lull between bursts does not remove replicas.",
    )
    max_step: int = Field(
        default=2,
        ge=1,
        description="Most replicas one change adds or removes; a new replica must load weights "
        "and warm up before it helps, so large jumps overshoot.",
    )
    min_replicas: int = Field(default=1, ge=1, description="Never recommend fewer.")
    max_replicas: int = Field(
        default=16, ge=1, description="Never recommend more (the budget of GPUs for the pool)."
    )
    newest_window_s: float = Field(
        default=300.0,
        ge=0,
        description="Replicas that appeared this recently are the newest; while any of them is "
        "unhealthy or misses the P95 TTFT target (weights.ttft_slo_s met by under 95% of its "
        "requests, or no TTFT yet), scale-out holds: more replicas would not help a pool whose "
        "last ones do not work yet.",
    )

    @model_validator(mode="after")
    def _bounds_in_order(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas must not exceed max_replicas")
        return self
