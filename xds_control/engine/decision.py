"""What the engine decides per endpoint, with everything needed to explain and continue it."""

from __future__ import annotations

from typing import Any, NamedTuple

from xds_control.discovery import Health
from xds_control.signals import Sample

__all__ = ["Factors", "WeightDecision"]


# NamedTuples, not frozen dataclasses: equally immutable, and four times faster to build;
# building 10,000 of them is still about a quarter of a reconcile.
class Factors(NamedTuple):
    """Each factor of an endpoint's score, all in (0, 1]; the score is their product."""

    capacity: float = 1.0
    queue: float = 1.0
    kv: float = 1.0
    prefix: float = 1.0
    gpu_memory: float = 1.0
    slo: float = 1.0
    engine: float = 1.0

    def product(self) -> float:
        """The score these factors give."""
        return (
            self.capacity * self.queue * self.kv * self.prefix * self.gpu_memory * self.slo
        ) * self.engine

    def as_dict(self) -> dict[str, float]:
        """Factor name -> value."""
        return {
            "capacity": self.capacity,
            "queue": self.queue,
            "kv": self.kv,
            "prefix": self.prefix,
            "gpu_memory": self.gpu_memory,
            "slo": self.slo,
            "engine": self.engine,
        }


class WeightDecision(NamedTuple):
    """One endpoint's weight, health and why.

    ``weight`` (1..100, never 0: Envoy rejects it) and ``health`` are what EDS publishes. The
    other fields explain the decision (``to_json``) and carry the state the next cycle needs;
    pass the previous cycle's decisions back to ``compute_weights`` unchanged.
    """

    address: str
    weight: int
    health: Health
    factors: Factors
    score: float
    """Product of the factors (0..1]: the share of a perfect endpoint this one is worth."""
    target: float
    """Weight the inputs call for this cycle (before smoothing), 0..100."""
    smoothed: float
    """EWMA of ``target``; quantised, step-limited and hysteresis-filtered into ``weight``."""
    warmup: float
    """Ramp multiplier in (0, 1]; 1 when not warming up."""
    reason: str
    health_reason: str
    computed_at: float
    """``now`` of the cycle that made this decision (Unix seconds)."""
    sample: Sample | None
    """The inputs: readings with their observation times, and rejected values with reasons."""
    first_seen_at: float | None
    """When the engine first saw the endpoint; ``None`` if present since the engine started."""
    last_fresh_at: float | None
    """When the endpoint last had a fresh reading; ``None`` if never."""
    held: float
    """Smoothed weight at ``last_fresh_at``: what a stale endpoint holds, then decays from."""
    started_at: float | None
    """Last seen process start time; a later one means a restart (warm-up again)."""
    warmup_from: float | None
    """When the current warm-up began; ``None`` when not warming up."""
    candidate: int
    """The quantised weight the engine would publish without hysteresis."""
    candidate_since: float
    """Since when ``candidate`` has not changed (a settled candidate is published)."""
    capacity_estimate: float | None = None
    """Absolute capacity (batch slots per second of decode step) from the endpoint's pooled
    slowness; ``None`` until the endpoint reported a step. The capacity factor is this over
    the pool's best."""
    slowness: float | None = None
    """The endpoint's scale (decode step) over its group's median, fitted from its step
    readings, in natural log (0: the group's median server; ``engine/speed.py``); ``None``
    until it reported a step."""
    slowness_recent: float | None = None
    """Quick average of the readings' slowness; when it passes ``slowness`` by the band,
    ``slowness`` jumps to it."""
    slowness_noise: float | None = None
    """Mean square distance of one reading's slowness from the slowness."""
    fit_w: float | None = None
    """Decayed sum of the weight (1 / step squared) of the endpoint's readings; with the four
    below, its terms in the fit of its scale and its group's line of step over prefill work."""
    fit_wx: float | None = None
    fit_wxx: float | None = None
    fit_wy: float | None = None
    fit_wxy: float | None = None
    weight_mean: float | None = None
    """Slow average of ``smoothed`` (over the policy's ``settle_s``)."""
    weight_spread: float | None = None
    """Mean square of ``smoothed``'s distance from ``weight_mean``: the weight's measured
    noise, squared; three standard deviations of it are the least a move must pass, and a
    published move starts both afresh (``engine/stability.py``)."""
    step_scale: float | None = None
    """Smoothed ratio of the engine's decode step to the data path's time per response byte on
    this endpoint (about its bytes per output token); the pool's median puts a data-path
    reading on the engines' scale (``engine/capacity.py``). ``None`` until both were read."""
    slo_compliance: float | None = None
    """Share of requests that met the TTFT target, averaged at ``slo_alpha``; the SLO factor
    reads how far it falls short of the pool's best (``engine/score.py``). ``None`` until
    read."""
    slo_noise: float | None = None
    """Mean square distance of one window's compliance from ``slo_compliance``."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable explanation (``/v1/weights?explain=1``)."""
        now = self.computed_at
        inputs: dict[str, Any] = {}
        rejected: dict[str, str] = {}
        scrape_failures = 0
        if self.sample is not None:
            for signal, reading in self.sample.readings.items():
                inputs[signal.value] = {
                    "value": reading.value,
                    "age_s": round(max(0.0, now - reading.observed_at), 3),
                    "source": reading.source,
                }
            rejected = {signal.value: why for signal, why in self.sample.rejected.items()}
            scrape_failures = self.sample.scrape_failures
        return {
            "address": self.address,
            "weight": self.weight,
            "health": self.health.value,
            "health_reason": self.health_reason,
            "reason": self.reason,
            "score": round(self.score, 6),
            "target": round(self.target, 3),
            "smoothed": round(self.smoothed, 3),
            "candidate": self.candidate,
            "warmup": round(self.warmup, 4),
            "factors": {k: round(v, 6) for k, v in self.factors.as_dict().items()},
            "inputs": inputs,
            "rejected": rejected,
            "scrape_failures": scrape_failures,
            "computed_at": self.computed_at,
            "last_fresh_at": self.last_fresh_at,
            "first_seen_at": self.first_seen_at,
        }
