"""The six policies the suite compares: Envoy's own balancing, then ours (engine weights)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xds_lab.harness.pool_config import one_pool_config

__all__ = ["POLICIES", "Policy", "control_plane_config"]


@dataclass(frozen=True, slots=True)
class Policy:
    """An Envoy LB policy, optionally with a bounded load, with or without engine weights."""

    name: str
    lb: str
    hash_balance_factor: int | None = None
    engine_weights: bool = False

    @property
    def ours(self) -> bool:
        """Weights come from the control plane's engine (not static, equal weights)."""
        return self.engine_weights


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("round_robin", "round_robin"),
        Policy("least_request", "least_request"),
        Policy("maglev", "maglev"),
        # 150% of the average: Envoy's documented example value for bounded load.
        Policy("maglev_bounded", "maglev", hash_balance_factor=150),
        Policy("maglev_weights", "maglev", engine_weights=True),
        Policy("least_request_weights", "least_request", engine_weights=True),
    )
}


def control_plane_config(
    *, policy: Policy, batch_slots: Mapping[str, int], listener_port: int
) -> dict[str, Any]:
    """One vLLM pool over the servers of ``batch_slots`` (address -> the server's
    ``max_num_seqs``) behind one listener, balanced by ``policy``.

    Engine weights turn on the direct-scrape fast path only; ``pools[].weights`` is left out
    on purpose, so every scenario runs the engine's defaults. Batch slots are listed per
    endpoint as an operator would (vLLM does not export them); only the engine reads them.
    """
    lb: dict[str, Any] = {"policy": policy.lb}
    if policy.hash_balance_factor is not None:
        lb["hash_balance_factor"] = policy.hash_balance_factor
    return one_pool_config(
        endpoints=[{"address": a, "batch_slots": slots} for a, slots in batch_slots.items()],
        listener_port=listener_port,
        pool={"engine": "vllm", "lb": lb},
        signals={"scrape": {"enabled": True}} if policy.engine_weights else None,
    )
