"""Settings of the weight engine, per pool: how signals become endpoint weights.

``WeightPolicy`` says how a pool turns signals into endpoint weights (``signals.py`` says where
signals come from). Defaults follow the fleet model in ``docs/weights.md``: capacity, KV usage
and queue depth carry the weight; every other factor is gentle so it cannot fight them. See
``docs/weights.md`` for each formula.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from xds_control.config.strict import StrictModel

__all__ = ["EngineBaseWeights", "HealthPolicy", "WeightPolicy"]


class EngineBaseWeights(StrictModel):
    """A prior per engine, multiplied into every weight (seed 2.4 of the product brief)."""

    vllm: float = Field(
        default=1.0, gt=0, le=1, description="vLLM is the reference engine (paged KV, batching)."
    )
    triton: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description="Triton: slightly below vLLM for generative work (request-shaped scheduler).",
    )
    onnxruntime: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="ONNX Runtime: no paged KV cache or prefix reuse, about half the batch slots.",
    )
    sglang: float = Field(
        default=1.0, gt=0, le=1, description="SGLang: on par with vLLM (RadixAttention, batching)."
    )

    def of(self, engine: str) -> float:
        """The base weight of ``engine`` (an ``Engine`` value such as ``"vllm"``)."""
        value: float = getattr(self, str(engine))
        return value


class HealthPolicy(StrictModel):
    """When an endpoint leaves load balancing: it is marked, never given weight 0."""

    unhealthy_after_failures: int = Field(
        default=3,
        ge=1,
        description="Consecutive failed direct scrapes before UNHEALTHY; 3 rides out one slow "
        "response or a GC pause at a sub-second scrape interval.",
    )
    drain_error_rate: float = Field(
        default=0.2,
        gt=0,
        le=1,
        description="Request error ratio at which an endpoint is DRAINING (no new requests); "
        "20% is far above normal client-caused errors.",
    )
    unhealthy_error_rate: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Request error ratio at which an endpoint is UNHEALTHY: it fails most work.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.unhealthy_error_rate < self.drain_error_rate:
            raise ValueError("unhealthy_error_rate must be >= drain_error_rate")
        return self


class WeightPolicy(StrictModel):
    """How one pool turns signals into endpoint weights (1..100)."""

    capacity_exponent: float = Field(
        default=1.0,
        ge=0,
        le=4,
        description="Weight ~ relative capacity ** exponent. 1 makes shares proportional to "
        "capacity, the setting that cut P99 TTFT 11-13x in the fleet model (docs/weights.md); "
        "0 ignores it.",
    )
    capacity_alpha: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="How much of an endpoint's past step readings fades each cycle (1 - "
        "alpha) in the fit of its speed and of its pool's shared line of step over prefill "
        "work (docs/weights.md). Speed is a property of the hardware that one window measures "
        "noisily; 0.05 at a 1 s cycle averages ~20 s. A real slowdown is followed at once "
        "(capacity_drop).",
    )
    capacity_recent_alpha: float = Field(
        default=0.3,
        gt=0,
        le=1,
        description="EWMA weight of each cycle's speed reading in the recent speed, a second, "
        "quick average kept only to catch real slowdowns (0.3: a few cycles); never slower "
        "than capacity_alpha.",
    )
    capacity_drop: float = Field(
        default=0.3,
        gt=0,
        lt=1,
        description="The least fall the recent capacity must show below the smoothed one "
        "before the smoothed one jumps down to it (it must also pass three standard "
        "deviations of the pool's measured noise): a slowed server loses its weight within a "
        "rate window and wins it back at capacity_alpha's pace.",
    )
    max_num_seqs: int = Field(
        default=256,
        ge=1,
        description="Batch slots assumed when the engine does not report them; vLLM's and "
        "SGLang's default max_num_seqs is 256.",
    )
    queue_exponent: float = Field(
        default=2.0,
        ge=0,
        le=4,
        description="Queue factor 1/(1+waiting/max_num_seqs)**exponent; 2 is the modelled "
        "setting: a queue as long as the batch quarters the weight.",
    )
    kv_coefficient: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="KV factor 1 - coefficient*kv_usage; 0.5 is the modelled softening (a full "
        "cache halves the weight rather than zeroing it: vLLM preempts, it does not fail).",
    )
    prefix_coefficient: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Prefix affinity bonus (1+c*hit_ratio**2)/(1+c); gentle, because MAGLEV "
        "already keeps prefixes where they are cached and large moves would remap keys.",
    )
    gpu_memory_coefficient: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="GPU memory factor 1 - c*used/(used+free); gentle, because vLLM and SGLang "
        "pre-allocate ~90% of GPU memory, so this mostly flags GPUs shared with other work.",
    )
    slo_coefficient: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="SLO factor 1 - c*(best - compliance), the shortfall against the pool's "
        "best averaged compliance; gentle, because missed TTFT is mostly the queue and capacity "
        "factors' business and counting it twice would oscillate.",
    )
    slo_alpha: float = Field(
        default=0.02,
        gt=0,
        le=1,
        description="EWMA weight of each cycle's TTFT compliance. One rate window's compliance "
        "swings with a few requests that arrived together (identical servers at steady load "
        "read 0.7-1.0 SLO factors cycle to cycle); averaged over ~50 s at a 1 s cycle it says "
        "how a server meets its target, and a burst, which the queue factor answers at once, "
        "moves it by a few percent. 1: no average.",
    )
    ttft_slo_s: float = Field(
        default=1.0,
        gt=0,
        description="Time-to-first-token target (seconds) for SLO compliance; 1 s is a common "
        "interactive target.",
    )
    engine_base_weights: EngineBaseWeights = Field(
        default_factory=EngineBaseWeights,
        description="Engine priors; they scale every weight of a pool equally.",
    )
    base_fraction: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Weight with no data = 100 * engine base * this; 0.5 puts an unknown "
        "endpoint mid-pack, and a pool with no data at all gets equal weights.",
    )
    ewma_alpha: float = Field(
        default=0.3,
        gt=0,
        le=1,
        description="Smoothing per cycle (1 = none); 0.3 follows a step within ~6 cycles and "
        "damps noise to about a third.",
    )
    hysteresis: float = Field(
        default=0.15,
        ge=0,
        lt=1,
        description="A weight is republished only when it moves by this fraction of its "
        "published value (or one quantum, or three standard deviations of its measured noise "
        "up to 20, whichever is largest); each push rebuilds Envoy's MAGLEV table.",
    )
    max_step: int = Field(
        default=30,
        ge=1,
        le=100,
        description="Largest change of a weight per cycle, so one bad sample cannot swing it.",
    )
    settle_s: float = Field(
        default=30.0,
        gt=0,
        description="Span of each weight's slow average and of its measured noise. A move "
        "the dead band holds back is published, as that average, once the average has moved "
        "by 3/4 quantum and by three standard errors: weights converge, and identical servers "
        "to one level.",
    )
    quantum: int = Field(
        default=5,
        ge=1,
        le=50,
        description="Weights are multiples of this (or 1); 5 gives 20 levels, enough for shares "
        "and coarse enough that noise does not reshuffle MAGLEV keys.",
    )
    stale_after_s: float = Field(
        default=10.0,
        gt=0,
        description="A reading older than this is stale; 10 s spans a few Prometheus scrapes.",
    )
    hold_s: float = Field(
        default=30.0,
        ge=0,
        description="With no fresh reading, hold the last weight this long (a Prometheus "
        "restart or a network blip should change nothing).",
    )
    decay_s: float = Field(
        default=60.0,
        gt=0,
        description="After the hold, move linearly to the base weight over this long.",
    )
    warmup_s: float = Field(
        default=60.0,
        ge=0,
        description="A new or restarted endpoint ramps to its computed weight over this long "
        "(cold KV cache, CUDA graphs, JIT); 0 disables the ramp.",
    )
    warmup_start_fraction: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Share of its computed weight a new endpoint starts with.",
    )
    health: HealthPolicy = Field(default_factory=HealthPolicy)
