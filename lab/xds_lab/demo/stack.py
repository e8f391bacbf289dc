"""What the tour runs on the one ``Stack``: a mixed simulated fleet in this process,
``xds-control serve`` with the weight engine on, a real Envoy in front; and one look at what
each of them reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import POOL, one_pool_config
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import Fleet, ServerSpec

__all__ = ["FLEET", "POOL", "DemoStack", "ServerState", "demo_config", "demo_stack", "observe"]

FLEET: tuple[tuple[str, str], ...] = (
    ("h100-0", "vllm-h100"),
    ("h100-1", "vllm-h100"),
    ("a100-0", "vllm-a100"),
    ("a100-1", "vllm-a100"),
    ("l4-0", "vllm-l4"),
    ("l4-1", "vllm-l4"),
)
"""One engine (a pool selects metric names by engine), three GPU classes: the capacity spread
DESIGN.md's fleet model used (A100 about 1.8x and L4 about 3.5x slower than an H100)."""

_SIGNALS = {
    # The fast path alone: Prometheus adds nothing the demo can show in a minute.
    # A 5 s rate window (default 10 s) lets a fault show within a short --duration run.
    "scrape": {"enabled": True, "interval_s": 0.5, "window_s": 5.0},
    "reconcile_period_s": 1.0,
}

DemoStack = Stack[Fleet]


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server as Envoy and the engine see it; ``None`` when not (yet) reported."""

    envoy_weight: int | None
    envoy_health: str | None
    engine_weight: int | None = None
    reason: str = ""
    factors: dict[str, float] = field(default_factory=dict)
    inputs: dict[str, float] = field(default_factory=dict)


def demo_stack(workdir: Path) -> DemoStack:
    """The fleet (in this process), the control plane and Envoy (child processes), not yet
    started."""
    fleet = local_fleet([ServerSpec(name=n, profile=p) for n, p in FLEET])
    return Stack(workdir=workdir, backends=fleet, log_level="warning")


def demo_config(stack: DemoStack) -> dict[str, Any]:
    """One vLLM pool over the whole fleet, weights from direct scrapes every second."""
    return one_pool_config(
        endpoints=[{"address": a} for a in stack.backends.addresses.values()],
        listener_port=stack.listener_port,
        pool={"engine": "vllm"},
        signals=_SIGNALS,
    )


async def observe(stack: DemoStack) -> dict[str, ServerState]:
    """Envoy's weight and health per server (from ``/clusters``: what Envoy really uses) and
    the engine's decision (``/v1/weights?explain=1``)."""
    hosts = await stack.envoy_hosts()
    decisions = await stack.decisions()
    states = {}
    for name in stack.backends.addresses:
        host = hosts.get(name)
        decision = decisions.get(name, {})
        states[name] = ServerState(
            envoy_weight=host.weight if host else None,
            envoy_health=host.health if host else None,
            engine_weight=decision.get("weight"),
            reason=str(decision.get("reason", "")),
            factors=dict(decision.get("factors", {})),
            inputs={k: v["value"] for k, v in decision.get("inputs", {}).items()},
        )
    return states
