"""The stack every fault case runs on: simulated servers ``s0``, ``s1``, ... behind the
harness's ``Stack`` with one real Envoy, and the one-pool config over them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.engine_stack import SimStack, sim_stack
from xds_lab.harness.pool_config import one_pool_config

PROFILES = ["vllm-h100", "vllm-h100", "vllm-h100", "vllm-h100"]


def fault_stack(workdir: Path, *, profiles: list[str] | None = None) -> SimStack:
    """Four H100 servers unless ``profiles`` says otherwise; not started."""
    return sim_stack(workdir, profiles=profiles or PROFILES)


def static_config(
    stack: SimStack,
    weights: list[int],
    *,
    route: dict[str, Any] | None = None,
    pool: dict[str, Any] | None = None,
    period_s: float = 0.2,
) -> dict[str, Any]:
    """The pool with fixed ``weights`` (no weight engine), reconciled every ``period_s``."""
    addresses = list(stack.backends.addresses.values())
    return one_pool_config(
        endpoints=[{"address": a, "weight": w} for a, w in zip(addresses, weights, strict=True)],
        listener_port=stack.listener_port,
        pool=pool,
        route=route,
        signals={"reconcile_period_s": period_s},
    )
