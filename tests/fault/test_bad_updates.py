"""Bad updates under load: a route table Envoy rejects, and a config file the control plane
refuses. Either way the gateway keeps serving on the last good config and nobody loses a
request."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from e2e.engine_stack import SimStack
from e2e.stack import eventually
from e2e.test_rejection_and_restart import OVERSIZED
from fault.fleet import fault_stack, static_config
from fault.load import SteadyLoad
from fault.report import record

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

WEIGHTS = [10, 20, 30, 40]


def by_name(stack: SimStack, weights: list[int]) -> dict[str, int]:
    return dict(zip(stack.backends.addresses, weights, strict=True))


async def rds(stack: SimStack) -> dict[str, object]:
    streams = await stack.control_plane.get_json("/v1/streams")
    stream = next(s for s in streams if s["node_id"] == "envoy-0")
    state: dict[str, object] = next(t for t in stream["types"] if t["type"] == "RDS")
    return state


async def test_update_envoy_rejects_keeps_last_good_config(tmp_path: Path) -> None:
    stack = fault_stack(tmp_path)
    try:
        await stack.start(static_config(stack, WEIGHTS))
        before = await rds(stack)
        async with SteadyLoad(stack.url) as load:
            await asyncio.sleep(1)
            headers = {"headers": [{"name": "x-tenant", "regex": OVERSIZED}]}
            stack.write_config(static_config(stack, WEIGHTS, route={"match": headers}))
            cut = time.monotonic()

            async def nacked() -> bool:
                return (await rds(stack))["nacks"] == 1

            await eventually(nacked, what="Envoy to NACK the route table")
            nack_s = time.monotonic() - cut
            sent = (await rds(stack))["responses"]
            await asyncio.sleep(2)  # ~10 reconcile periods: the rejected version is not resent
            after = await rds(stack)
            stack.write_config(static_config(stack, WEIGHTS))

            async def acked() -> bool:
                state = await rds(stack)
                return state["acked_version"] == state["sent_version"] == before["acked_version"]

            await eventually(acked, what="Envoy to ACK the fixed route table")
            await asyncio.sleep(1)
        counts = load.counts()
        record("update rejected by Envoy (NACK)", counts, recover_s=nack_s)
        assert counts.failed == 0, (counts, load.failures()[:5])
        assert after["responses"] == sent == int(str(before["responses"])) + 1, (before, after)
        assert after["nacks"] == 1
        assert after["acked_version"] == before["acked_version"]
        assert "max program size" in str(after["last_error"]), after
        metrics = await stack.control_plane.metrics()
        assert 'xds_control_ads_nacks_total{type="RDS"} 1.0' in metrics, metrics
        assert await stack.envoy_weights() == by_name(stack, WEIGHTS)
    finally:
        await stack.close()


async def test_invalid_config_on_reload_is_refused_and_old_config_kept(tmp_path: Path) -> None:
    stack = fault_stack(tmp_path)
    try:
        await stack.start(static_config(stack, WEIGHTS))
        cp = stack.control_plane
        version = (await cp.get_json("/v1/status"))["version"]
        async with SteadyLoad(stack.url) as load:
            await asyncio.sleep(1)
            stack.write_config(static_config(stack, [0, *WEIGHTS[1:]]))  # weight 0: invalid
            edited = time.monotonic()

            async def refused() -> bool:
                return bool((await cp.get_json("/v1/status"))["config_error"])

            await eventually(refused, what="the invalid config to be refused")
            refuse_s = time.monotonic() - edited
            await asyncio.sleep(2)  # ~10 reconcile periods on the refused file
            status = await cp.get_json("/v1/status")
            weights = await stack.envoy_weights()
        counts = load.counts()
        record("invalid config file on hot reload", counts, recover_s=refuse_s)
        assert counts.failed == 0, (counts, load.failures()[:5])
        assert "pools[0].endpoints[0].weight" in status["config_error"], status
        assert status["version"] == version
        assert weights == by_name(stack, WEIGHTS)
        log = cp.process.log_path.read_text()
        assert "pools[0].endpoints[0].weight" in log
        metrics = await cp.metrics()
        assert 'xds_control_config_reloads_total{result="rejected"} 1.0' in metrics
    finally:
        await stack.close()
