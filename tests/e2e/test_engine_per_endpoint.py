"""One pool mixing engines through real Envoy: two vLLM servers and a Triton one exporting its
own nv_* names, each endpoint's engine set, the direct scrape on and the data path left to its
default, which the mix turns on. Every
endpoint is read in its own dialect and gets a weight from its readings; the Triton one's
capacity comes from the data path (its compute per execution is no decode step), on the vLLM
servers' scale: its A100 is slower than their H100s, and its weight says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from e2e.engine_stack import SimStack, load, load_in_background, sim_stack
from e2e.stack import eventually
from xds_lab.harness.pool_config import one_pool_config

FAST_PATH = {"scrape": {"enabled": True, "interval_s": 0.25}, "reconcile_period_s": 0.5}
"""No ``data_path`` setting: a pool that mixes vLLM with Triton turns it on by itself."""


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[SimStack]:
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-h100", "triton-a100"])
    try:
        yield stack
    finally:
        await stack.close()


@pytest.mark.serial  # capacities from measured step times compared: not next to other load
async def test_a_pool_of_vllm_and_native_triton_servers_reads_each_in_its_own_dialect(
    stack: SimStack,
) -> None:
    addresses = stack.backends.addresses
    endpoints: list[dict[str, Any]] = [
        {"address": addresses["s0"]},
        {"address": addresses["s1"]},
        {"address": addresses["s2"], "engine": "triton"},
    ]
    await stack.start(
        one_pool_config(
            endpoints=endpoints,
            listener_port=stack.listener_port,
            pool={"engine": "vllm"},
            signals=FAST_PATH,
        )
    )
    served = await load(stack, rate=6, seconds=4, stream_fraction=1.0)
    assert set(served) == {"s0", "s1", "s2"}, served

    def by_server(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
        names = {a: n for n, a in addresses.items()}
        return {names[d["address"]]: d for d in view["pools"]["chat"]}

    async def every_endpoint_read() -> bool:
        found = by_server(await stack.control_plane.get_json("/v1/weights?explain=1"))
        vllm_read = all("decode_step_s" in found[s]["inputs"] for s in ("s0", "s1"))
        triton = found["s2"]["inputs"]
        timed = "engines' decode-step scale" in found["s2"]["reason"]
        return vllm_read and timed and {"waiting", "kv_usage", "running"} <= triton.keys()

    await load(stack, rate=6, seconds=2, stream_fraction=1.0)
    await eventually(every_endpoint_read, timeout=15, what="every endpoint read in its dialect")
    decisions = by_server(await stack.control_plane.get_json("/v1/weights?explain=1"))
    triton = decisions["s2"]
    # Triton's own names: its queue and KV readings come from the scrape of nv_* metrics.
    assert triton["inputs"]["kv_usage"]["source"] == "scrape"
    assert "decode_step_s" not in triton["inputs"]
    assert not triton["reason"].startswith("no data"), triton["reason"]
    assert "datapath_step_s" in triton["inputs"]
    # The A100 settles below both H100s; on a loaded machine the first seconds' readings may
    # not yet order them, so the load goes on while the order is awaited.
    load_in_background(stack, rate=6, seconds=30, stream_fraction=1.0)
    capacity: dict[str, float] = {}

    async def a100_below_h100s() -> bool:
        found = by_server(await stack.control_plane.get_json("/v1/weights?explain=1"))
        capacity.update({name: found[name]["factors"]["capacity"] for name in ("s0", "s1", "s2")})
        return capacity["s2"] < min(capacity["s0"], capacity["s1"])

    try:
        await eventually(a100_below_h100s, timeout=30, what="the A100 below both H100s")
    except AssertionError:
        raise AssertionError(f"capacities: {capacity}") from None
    assert triton["factors"]["engine"] == pytest.approx(0.85)  # Triton's engine base
    for name in ("s0", "s1"):
        assert "capacity: decode step (engine)" in decisions[name]["reason"]
        assert decisions[name]["factors"]["engine"] == 1.0
    weights = await stack.envoy_weights()
    assert set(weights) == {"s0", "s1", "s2"}
    assert all(w >= 1 for w in weights.values()), weights
    assert (await stack.control_plane.get_json("/v1/status")) is not None  # still serving
