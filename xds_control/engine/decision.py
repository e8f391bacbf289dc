"""What the engine decides per endpoint, in three parts: what is published, why, and what
the next cycle continues from.

A ``WeightDecision`` is the weight and health EDS publishes, with an ``Explanation`` (the
score, the target, the reasons, the raw sample: what ``/v1/weights?explain=1`` shows) and an
``EndpointState`` (everything the next cycle reads: ``compute_weights`` takes the states back
as ``previous``, and the state file stores them and nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from xds_control.discovery import Health
from xds_control.signals import Sample

__all__ = ["EndpointState", "Explanation", "Factors", "WeightDecision", "states_of"]


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


class EndpointState(NamedTuple):
    """All the engine remembers of one endpoint from one cycle to the next.

    It repeats the decision's published ``weight`` and ``health`` so that it stands alone: the
    step limit and the dead band move from the published weight, and a restarted plane
    republishes both until its engine decides again.
    """

    weight: int
    """The weight published this cycle (1..100)."""
    health: Health
    """The health published this cycle."""
    computed_at: float
    """``now`` of the cycle that made this decision (Unix seconds)."""
    factors: Factors
    """This cycle's factors: a factor whose signal is missing next cycle keeps its value."""
    smoothed: float
    """EWMA of the target; quantised, step-limited and hysteresis-filtered into ``weight``."""
    candidate: int
    """The quantised weight the engine would publish without hysteresis."""
    candidate_since: float
    """Since when ``candidate`` has not changed (a settled candidate is published)."""
    first_seen_at: float | None
    """When the engine first saw the endpoint; ``None`` if present since the engine started."""
    last_fresh_at: float | None
    """When the endpoint last had a fresh reading; ``None`` if never."""
    last_fresh_weight: float
    """Smoothed weight at ``last_fresh_at``: what a stale endpoint keeps, then decays from."""
    started_at: float | None
    """Last seen process start time; a later one means a restart (warm-up again)."""
    warmup_from: float | None
    """When the current warm-up began; ``None`` when not warming up."""
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


class Explanation(NamedTuple):
    """Why an endpoint got its weight, beyond what its state shows; nothing reads it back."""

    score: float
    """Product of the factors (0..1]: the share of a perfect endpoint this one is worth."""
    target: float
    """Weight the inputs call for this cycle (before smoothing), 0..100."""
    warmup: float
    """Ramp multiplier in (0, 1]; 1 when not warming up."""
    reason: str
    health_reason: str
    sample: Sample | None
    """The inputs: readings with their observation times, and rejected values with reasons."""
    capacity_estimate: float | None = None
    """Absolute capacity (batch slots per second of decode step) from the endpoint's pooled
    slowness; ``None`` until the endpoint reported a step. The capacity factor is this over
    the pool's best; a route over pools adds its pools' up."""


_RESUMED = "resumed from the state file"


class WeightDecision(NamedTuple):
    """One endpoint's weight and health, why, and what the next cycle continues from.

    ``weight`` (1..100, never 0: Envoy rejects it) and ``health`` are what EDS publishes.
    """

    address: str
    weight: int
    health: Health
    explanation: Explanation
    state: EndpointState

    @classmethod
    def resumed(cls, address: str, state: EndpointState) -> WeightDecision:
        """The decision a restarted plane publishes from a saved ``state`` until its engine
        decides again: the same weight and health, explained by the state alone."""
        return cls(
            address=address,
            weight=state.weight,
            health=state.health,
            explanation=Explanation(
                score=state.factors.product(),
                target=state.smoothed,
                warmup=1.0,
                reason=_RESUMED,
                health_reason=_RESUMED,
                sample=None,
            ),
            state=state,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable explanation (``/v1/weights?explain=1``)."""
        why, state = self.explanation, self.state
        now = state.computed_at
        inputs: dict[str, Any] = {}
        rejected: dict[str, str] = {}
        scrape_failures = 0
        if why.sample is not None:
            for signal, reading in why.sample.readings.items():
                inputs[signal.value] = {
                    "value": reading.value,
                    "age_s": round(max(0.0, now - reading.observed_at), 3),
                    "source": reading.source,
                }
            rejected = {signal.value: cause for signal, cause in why.sample.rejected.items()}
            scrape_failures = why.sample.scrape_failures
        return {
            "address": self.address,
            "weight": self.weight,
            "health": self.health.value,
            "health_reason": why.health_reason,
            "reason": why.reason,
            "score": round(why.score, 6),
            "target": round(why.target, 3),
            "smoothed": round(state.smoothed, 3),
            "candidate": state.candidate,
            "warmup": round(why.warmup, 4),
            "factors": {k: round(v, 6) for k, v in state.factors.as_dict().items()},
            "inputs": inputs,
            "rejected": rejected,
            "scrape_failures": scrape_failures,
            "computed_at": state.computed_at,
            "last_fresh_at": state.last_fresh_at,
            "first_seen_at": state.first_seen_at,
        }


def states_of(decisions: Mapping[str, WeightDecision]) -> dict[str, EndpointState]:
    """Each decision's state, by address: what ``compute_weights`` takes back as ``previous``."""
    return {address: decision.state for address, decision in decisions.items()}
