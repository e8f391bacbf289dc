"""The control plane cut off from Envoy by the network: a proxy between Envoy and the xDS
port closes every connection and refuses new ones. Envoy keeps serving on its last config,
reconnects within its back-off once the link is back, and gets the change made during the
cut."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from e2e.stack import eventually
from fault.fleet import fault_stack, static_config
from fault.load import SteadyLoad
from fault.proxy import CuttableProxy
from fault.report import record
from xds_lab.harness.envoy import EnvoyProcess

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

BEFORE = [10, 20, 30, 40]
DURING = [40, 30, 20, 10]
CUT_S = 8.0


async def test_envoy_serves_through_a_network_cut_and_resyncs_after(tmp_path: Path) -> None:
    stack = fault_stack(tmp_path)
    proxy = CuttableProxy(target=stack.control_plane.xds_port)
    try:
        await proxy.start()
        await stack.start(static_config(stack, BEFORE), envoys=0)
        envoy = EnvoyProcess(workdir=tmp_path, xds_port=proxy.port, node_id="envoy-0")
        stack.envoys.append(envoy)
        await envoy.start()
        await envoy.wait_live()
        names = list(stack.backends.addresses)
        async with SteadyLoad(stack.url) as load:
            await asyncio.sleep(2)
            await proxy.cut()
            stack.write_config(static_config(stack, DURING))

            async def streams_gone() -> bool:
                return not await stack.control_plane.get_json("/v1/streams")

            await eventually(streams_gone, what="the control plane to see the stream go")
            await asyncio.sleep(CUT_S)
            during = await stack.envoy_weights()
            connections = proxy.connections
            await proxy.restore()
            restored = time.monotonic()

            async def resynced() -> bool:
                return await stack.envoy_weights() == dict(zip(names, DURING, strict=True))

            await eventually(resynced, timeout=40, what="Envoy to get the change made in the cut")
            resync_s = time.monotonic() - restored
            await asyncio.sleep(2)
        counts = load.counts()
        record("control plane cut off from Envoy (network)", counts, recover_s=resync_s)
        assert counts.failed == 0, (counts, load.failures()[:5])
        assert during == dict(zip(names, BEFORE, strict=True)), during
        assert proxy.connections > connections  # a new connection, not a resumed one
        # Envoy's ADS back-off starts at 0.5 s and is capped at 30 s (with jitter); a cut of a
        # few seconds leaves it at a few seconds at most.
        assert resync_s < 15, resync_s
    finally:
        await stack.close()
        await proxy.close()
