"""Scenario files: fleet, workload, load levels, durations, policies, seed and mid-run events.

A scenario is YAML (``xds_lab/bench/scenarios/*.yaml``; any path works)::

    name: mixed
    seed: 7
    fleet:
      - {name: h100-0, profile: vllm-h100}
      - {name: l4-0, profile: onnxruntime-l4, overrides: {metrics: vllm}}
    workload: {workload: chat, input_mean: 730, output_mean: 150}
    slo: {ttft_s: 2.0, tpot_s: 0.1}
    loads: [0.2, 0.5, 0.8, 1.0, 1.3]     # fractions of the measured capacity
    duration_s: 12
    policies: [round_robin, least_request, maglev_weights]
    events: [{at_s: 10, server: l4-0, slowdown: 4}]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xds_control.config.load import load_model
from xds_lab.bench.policies import DEFAULT_POLICIES, POLICIES
from xds_lab.sim.profiles import get_profile

__all__ = ["Event", "FleetServer", "Scenario", "SloSpec", "load_scenario"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FleetServer(_Model):
    """One simulated server of the scenario's fleet."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="Unique server name.")
    profile: str = Field(description="A simulator profile such as vllm-h100.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Profile field values.")
    late: bool = Field(
        False, description="Not in the pool at the start; an `add` event brings it in cold."
    )


class Event(_Model):
    """Something that happens ``at_s`` seconds into every measured point."""

    at_s: float = Field(ge=0, description="Seconds after the point's first request.")
    server: str = Field(description="The server it happens to.")
    slowdown: float | None = Field(None, ge=1.0, description="Degrade: multiply step times.")
    add: bool = Field(False, description="Add this (late) server to the pool: a cold start.")

    @model_validator(mode="after")
    def _one_kind(self) -> Self:
        if (self.slowdown is not None) == self.add:
            raise ValueError("an event either sets `slowdown` or has `add: true`")
        return self


class SloSpec(_Model):
    """Goodput counts requests that met both objectives."""

    ttft_s: float = Field(2.0, gt=0, description="Time to first token objective.")
    tpot_s: float = Field(0.1, gt=0, description="Time per output token objective.")


class Scenario(_Model):
    """Everything one benchmark scenario needs; ``runner.run_scenario`` runs it."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Names the output files.")
    description: str = ""
    seed: int = Field(1, description="Seeds arrivals, lengths and the servers' jitter.")
    time_scale: float = Field(
        1.0, gt=0, description="Multiplies every simulated duration (see docs/benchmarks.md)."
    )
    fleet: tuple[FleetServer, ...] = Field(min_length=1)
    workload: dict[str, Any] = Field(
        default_factory=dict,
        description="LoadSpec fields (workload, input_mean, groups, ...) but rate/requests/seed.",
    )
    slo: SloSpec = Field(default_factory=SloSpec)
    capacity_rps: float | None = Field(
        None, gt=0, description="Skip measuring: the fleet's capacity in requests/s."
    )
    capacity_step_s: float = Field(6.0, gt=0, description="Length of one capacity ramp step.")
    loads: tuple[float, ...] = Field(
        (0.2, 0.5, 0.8, 1.0, 1.3), min_length=1, description="Fractions of capacity."
    )
    duration_s: float = Field(12.0, gt=0, description="Seconds of arrivals per point.")
    warmup_s: float = Field(
        8.0, ge=0, description="Unmeasured load per policy first, so engine weights have data."
    )
    warmup_load: float = Field(0.5, gt=0, description="Fraction of capacity during warm-up.")
    request_timeout_s: float = Field(
        25.0, gt=0, description="A request still unanswered this long after it left is a timeout."
    )
    policies: tuple[str, ...] = Field(DEFAULT_POLICIES, min_length=1)
    events: tuple[Event, ...] = ()
    signals: dict[str, Any] = Field(
        default_factory=dict,
        description="The control plane's `signals` for the engine-weighted policies, over the "
        "bench's own (the direct scrape on): e.g. `{data_path: {enabled: true}}`, or "
        "`{scrape: {enabled: false}}` for servers with no metrics.",
    )

    streamed_route: bool = Field(
        False,
        description="Read bodies in Envoy (`classify`) and give streamed requests a route of "
        "their own (`match: {stream: true}`), so the defaults of such a route apply to them "
        "(its per-try idle timeout); the classifier's own cost counts in every latency.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [s.name for s in self.fleet]
        if len(names) != len(set(names)):
            raise ValueError("fleet server names must be unique")
        for server in self.fleet:
            try:
                get_profile(server.profile, **server.overrides)
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"fleet server {server.name}: {exc}") from exc
        unknown = sorted(set(self.policies) - set(POLICIES))
        if unknown:
            raise ValueError(f"unknown policies {unknown}; known: {sorted(POLICIES)}")
        late = {s.name for s in self.fleet if s.late}
        for event in self.events:
            if event.server not in names:
                raise ValueError(f"event names unknown server {event.server!r}")
            if event.add and event.server not in late:
                raise ValueError(f"`add` event for {event.server!r}, which is not `late`")
        if late - {e.server for e in self.events if e.add}:
            raise ValueError("every `late` server needs an `add` event")
        if self.events and len(self.loads) != 1:
            raise ValueError("a scenario with events runs one load level")
        return self

    def pool_servers(self, *, added: frozenset[str] = frozenset()) -> list[str]:
        """Servers in the pool: all but the late ones not yet added."""
        return [s.name for s in self.fleet if not s.late or s.name in added]


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; ``ConfigError`` names the bad field."""
    return load_model(Path(path), Scenario)
