"""Flow control: a picker pool holds requests while every server is saturated, instead of
sending them on to queue in a server or shedding them.

A held request waits in the picker (Envoy's ``ext_proc`` stream stays open, its message timeout
extended up to ``max_wait_s``) in a bounded queue per priority band; when a server has room the
picker dispatches the next one: a tenant within its fair share of the pool before one over it,
then the highest band first, within a band the tenants in turn, within a tenant by arrival. A
request is refused (429 with ``retry-after``) only when its queue is full or it has waited its
band's TTL (``band_max_wait_s``, else ``max_wait_s``); a pool with no ready server answers 503
after it.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from xds_control.config.limits import HeaderName
from xds_control.config.strict import StrictModel

__all__ = ["HOLD_MARGIN_S", "BandName", "FlowControl", "TokenBudget"]

BandName = Literal["critical", "high", "medium"]

HOLD_MARGIN_S = 1.0
"""Envoy waits for a held request's answer ``max_wait_s`` plus this: the picker answers first,
with its refusal, so Envoy's own timeout (which fails open or closed) never decides."""


class TokenBudget(StrictModel):
    """Output tokens a tenant may be served per window, fleet-wide (each control-plane replica
    holds its share, ``control_planes``): a request is charged its estimate when admitted (its
    ``max_tokens``, else the pool's ``estimate_tokens``) and settled to the ``usage`` its
    response reports."""

    tenant: str = Field(
        default="*",
        min_length=1,
        max_length=253,
        description="The tenant (the value of `tenant_header`) this budget is for; `*`: "
        "each tenant its own budget of this size.",
    )
    priority: BandName | None = Field(
        default=None,
        description="Only requests of this band count against it; unset: every band.",
    )
    output_tokens: int = Field(
        gt=0,
        le=10**12,
        description="Output tokens per window, for the whole fleet: with `control_planes`, "
        "each replica holds this over their number. A request whose estimate does not fit what "
        "is left is refused (429, reason `token-budget`, `retry-after` the seconds until "
        "the next window), unless nothing is charged yet in the window.",
    )
    window_s: float = Field(
        default=60.0,
        gt=0,
        le=86_400,
        description="The window's length: budgets renew at each multiple of it.",
    )


class FlowControl(StrictModel):
    """How a picker pool holds requests when saturated (per control-plane replica)."""

    max_wait_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="Longest a request is held (its TTL) before it is refused: 429 with "
        "`retry-after`, or 503 when the pool has no ready server (a pool scaling from zero "
        "serves what waited if a server turns ready within it). Envoy's `ext_proc` message "
        "timeout is extended to this for a held request (`max_message_timeout`).",
    )
    band_max_wait_s: dict[BandName, float] = Field(
        default_factory=dict,
        description="A shorter TTL for a band (`critical`, `high`, `medium`): once a request "
        "of it has waited this long it is refused (429, `max-wait`) rather than served too "
        "late, so no capacity goes to an answer that can no longer meet its time-to-first-"
        "token target (set it to the target less the time a server takes to answer). A band "
        "not named waits `max_wait_s`; none may wait longer.",
    )
    max_queued: int = Field(
        default=1024,
        ge=1,
        le=1_000_000,
        description="Requests held per pool and priority band; one more is refused at once "
        "(429, reason `queue-full`).",
    )
    max_queued_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        le=4 * 1024 * 1024 * 1024,
        description="Request body bytes held per pool (all bands): the picker keeps each held "
        "body until it dispatches it.",
    )
    tenant_header: HeaderName = Field(
        default="x-gateway-inference-fairness-id",
        description="The request header that names its tenant (the Inference Extension's "
        "fairness id); requests without it share one tenant. A tenant served more than "
        "its equal share of the pool's recent dispatches waits behind the tenants within "
        "theirs, whatever its band; within a band, tenants take turns. So a heavy tenant "
        "cannot starve a light one.",
    )
    priority_header: HeaderName = Field(
        default="x-priority",
        description="The request header that names its priority band (`critical`, `high`, "
        "`medium`: the limits' classes and header); without it, or with another value: its "
        "route's `priority`, else the listener's `limits.default`, else `medium`. Higher "
        "bands are dispatched first.",
    )
    queue_depth: float = Field(
        default=5.0,
        gt=0,
        le=10_000,
        description="A server is saturated when this many requests wait at it: its engine's "
        "waiting queue (fresh, see `max_signal_age_s`) plus what this picker sent it since "
        "that reading and it has not yet answered; without the engine's reading, the "
        "requests it has not answered yet (queued or in prefill). llm-d's default (5).",
    )
    kv_usage: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="A server is saturated when its KV cache is this full (a fresh reading "
        "of its engine's KV usage). llm-d's default (0.8).",
    )
    max_signal_age_s: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="An engine reading older than this says nothing about saturation (the "
        "requests not yet answered still count).",
    )
    budgets: tuple[TokenBudget, ...] = Field(
        default=(),
        max_length=1000,
        description="Output-token budgets per tenant (docs/flow-control.md); a request "
        "counts against the first that matches its tenant and band. With any, the picker "
        "reads the responses' bodies for their `usage` (streamed responses need "
        "`stream_options.include_usage`; without it the estimate stays charged).",
    )
    estimate_tokens: int = Field(
        default=256,
        gt=0,
        le=10**7,
        description="What a request without `max_tokens` (or `max_completion_tokens`) is "
        "charged against a budget until its response's usage settles it.",
    )

    @model_validator(mode="after")
    def _band_waits_within_max_wait(self) -> Self:
        for band, wait in self.band_max_wait_s.items():
            if not 0 < wait <= self.max_wait_s:
                raise ValueError(
                    f"band_max_wait_s.{band}: {wait:g} s must be above 0 and at most "
                    f"max_wait_s ({self.max_wait_s:g} s)"
                )
        return self

    def wait_s(self, band: str) -> float:
        """How long a request of ``band`` (its name) may be held."""
        return next((w for b, w in self.band_max_wait_s.items() if b == band), self.max_wait_s)
