"""Priority classes and their admission rates, enforced by Envoy per route.

A request's priority class comes from a header (``x-priority`` by default), else from its
route's ``priority``, else from the listener's ``limits.default``. Each class has a fleet-wide
rate (requests per second) that Envoy's local rate limit enforces per route; the control
plane divides it among the Envoys of a node group and adapts it to the measured P99 of the
route's pools. Critical and High take Envoy's HIGH routing priority, so they draw on each
pool's second set of circuit breakers (``high_priority_breakers``) and cannot be starved of
connections by Medium.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["AdaptPolicy", "ClassRate", "HighPriorityBreakers", "Limits", "PriorityClass"]


class PriorityClass(StrEnum):
    """A request's priority; under overload Medium is shed first, Critical last."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"

    @property
    def high(self) -> bool:
        """Whether Envoy routes it at HIGH priority (its own circuit breakers)."""
        return self is not PriorityClass.MEDIUM


SHED_ORDER = (PriorityClass.MEDIUM, PriorityClass.HIGH, PriorityClass.CRITICAL)
"""Which class the adaptive rule lowers first when P99 is over target (and raises last)."""

HeaderName = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64, description="A lower-case header name."),
]


class ClassRate(StrictModel):
    """One class's fleet-wide admission rate per route, and its burst."""

    rate_per_s: float = Field(
        gt=0,
        le=1_000_000,
        description="Requests (or, with `unit: tokens`, LLM tokens) per second the whole node "
        "group admits on each route for this class when P99 is within target (the ceiling "
        "the adaptive rule returns to); each Envoy of the group enforces its share.",
    )
    burst_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Bucket size in seconds of fill: one second absorbs a client's burst "
        "without letting a backlog through at once.",
    )


class AdaptPolicy(StrictModel):
    """How the rates follow the measured P99 (lower while over target, raise back while under)."""

    enabled: bool = Field(
        default=True, description="Adapt to P99 (needs `signals.prometheus_url`); off: fixed."
    )
    ttft_p99_target_s: float | None = Field(
        default=2.0,
        gt=0,
        description="P99 time to first token of a route's pools above which admission is "
        "lowered; unset: not watched.",
    )
    tpot_p99_target_s: float | None = Field(
        default=None,
        gt=0,
        description="P99 time per output token of a route's pools above which admission is "
        "lowered too (token-level backpressure); unset: not watched.",
    )
    gain: float = Field(
        default=0.5,
        gt=0,
        le=5,
        description="Fraction of the P99 excess taken off per cycle: P99 20% over target "
        "lowers the rate 10%; half the excess per cycle converges without overshooting.",
    )
    max_step: float = Field(
        default=0.25,
        gt=0,
        lt=1,
        description="Largest change per cycle as a fraction of the rate: one bad reading "
        "cannot close the gate.",
    )
    raise_step: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Fraction of the ceiling given back per cycle while P99 is under target: "
        "slower than lowering, so a recovered pool is not flooded at once.",
    )
    floor: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="Lowest rate as a fraction of the configured one: a class is never shut "
        "out, so its P99 stays measurable.",
    )
    period_s: float = Field(
        default=5.0,
        ge=0,
        le=600,
        description="Least time between two changes of a route's rates. Envoy builds a new, "
        "full bucket from each new route config, so every change lets one burst through; "
        "changing at most every 5 s bounds that to one burst per 5 s.",
    )
    window: str = Field(
        default="1m",
        pattern=r"^[0-9]+(ms|s|m|h)$",
        description="PromQL range for the P99 (histogram_quantile over rate()).",
    )


class HighPriorityBreakers(StrictModel):
    """Envoy's circuit breakers for HIGH-priority requests (Critical, High), per pool."""

    max_connections: int = Field(default=1024, ge=1, description="Upstream connections.")
    max_pending_requests: int = Field(default=1024, ge=1, description="Requests queued in Envoy.")
    max_requests: int = Field(default=1024, ge=1, description="Requests in flight.")
    max_retries: int = Field(default=3, ge=0, description="Retries in flight.")


def _default_classes() -> dict[PriorityClass, ClassRate]:
    return {}


class Limits(StrictModel):
    """A listener's priority classes and admission rates."""

    header: HeaderName = Field(
        default="x-priority",
        description="Request header naming the class (`critical`, `high`, `medium`); other "
        "values and its absence take the route's `priority`, else `default`.",
    )
    unit: Literal["requests", "tokens"] = Field(
        default="requests",
        description="What a rate counts: requests, or tokens, each request costing the number "
        "in `cost_header` (Envoy's `hits_addend`); a request without it costs one.",
    )
    cost_header: HeaderName = Field(
        default="x-cost-tokens",
        description="With `unit: tokens`, the header holding a request's cost: by default the "
        "classifier's estimated prompt tokens + max_tokens (`classify.cost_tokens_header`), "
        "or a header the client sets.",
    )
    default: PriorityClass = Field(
        default=PriorityClass.MEDIUM,
        description="Class of a request with no (valid) header on a route without `priority`.",
    )
    classes: dict[PriorityClass, ClassRate] = Field(
        default_factory=_default_classes,
        description="Rate per class; a class left out is not rate-limited (its route still "
        "takes its priority).",
    )
    retry_after_s: int = Field(
        default=1,
        ge=1,
        le=3600,
        description="`retry-after` seconds on a 429: one bucket refill.",
    )
    adapt: AdaptPolicy = Field(
        default_factory=AdaptPolicy, description="How the rates follow the measured P99."
    )
    high_priority_breakers: HighPriorityBreakers = Field(
        default_factory=HighPriorityBreakers,
        description="Each pool's circuit breakers for Critical and High requests (Envoy's "
        "HIGH priority), apart from the pool's `circuit_breakers` that Medium uses.",
    )
