"""Each endpoint is a target in its own engine's dialect: its own ``engine``, else its pool's."""

from __future__ import annotations

from xds_control.config import Engine, Pool, WeightPolicy
from xds_control.discovery import Endpoint
from xds_control.signals import Target, targets_for_pool


def an_endpoint(i: int, engine: Engine | None = None) -> Endpoint:
    return Endpoint(
        address=f"10.0.0.{i}:8000", host=f"10.0.0.{i}", port=8000, weight=10, engine=engine
    )


def test_targets_carry_each_endpoints_own_engine() -> None:
    pool = Pool(name="p", engine=Engine.VLLM, weights=WeightPolicy(ttft_slo_s=1.5))
    endpoints = [an_endpoint(1), an_endpoint(2, Engine.TRITON), an_endpoint(3, Engine.SGLANG)]
    assert targets_for_pool(pool, endpoints) == (
        Target(address="10.0.0.1:8000", engine=Engine.VLLM, ttft_slo_s=1.5),
        Target(address="10.0.0.2:8000", engine=Engine.TRITON, ttft_slo_s=1.5),
        Target(address="10.0.0.3:8000", engine=Engine.SGLANG, ttft_slo_s=1.5),
    )
