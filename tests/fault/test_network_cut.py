"""The control plane cut off from Envoy by the network: a proxy between Envoy and the xDS
port closes every connection and refuses new ones. Envoy keeps serving on its last config,
reconnects within its back-off once the link is back, and gets the change made during the
cut."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.engine_stack import SimStack
from e2e.stack import eventually
from fault.fleet import fault_stack, static_config
from fault.load import SteadyLoad
from fault.proxy import CuttableProxy
from fault.report import record
from xds_control.xds.bootstrap import XDS_CLUSTER
from xds_lab.harness.envoy import EnvoyProcess

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

BEFORE = [10, 20, 30, 40]
DURING = [40, 30, 20, 10]
MAX_BACK_OFF_S = 5.0
"""The ADS reconnect back-off cap the bootstrap asks for (Envoy's own default is 30 s)."""
CUT_S = 16.0
CONNECT_FAILS = f"cluster.{XDS_CLUSTER}.upstream_cx_connect_fail"


@dataclass
class Cut:
    """What one cut showed: Envoy's weights during it, when it tried to reconnect, and how
    long after the link came back it had the change made during the cut."""

    cut_s: float
    during: dict[str, int]
    attempts: list[float]
    resync_s: float


async def behind_proxy(stack: SimStack, proxy: CuttableProxy, tmp_path: Path) -> EnvoyProcess:
    """Start the stack with an Envoy whose way to the control plane is ``proxy``."""
    # The control plane first: its ports are picked ahead, and the proxy's might take one.
    await stack.start(static_config(stack, BEFORE), envoys=0)
    await proxy.start()
    envoy = EnvoyProcess(workdir=tmp_path, xds_port=proxy.port, node_id="envoy-0")
    stack.envoys.append(envoy)
    await envoy.start()
    await envoy.wait_live()
    return envoy


async def cut_and_restore(stack: SimStack, proxy: CuttableProxy, *, cut_s: float) -> Cut:
    """Cut for ``cut_s`` seconds while the weights change; restore; wait for the change."""
    names = list(stack.backends.addresses)
    await proxy.cut()
    cut_at = time.monotonic()
    stack.write_config(static_config(stack, DURING))
    attempts: list[float] = []  # Envoy's failed connects, from its stats (0.2 s resolution)
    fails = (await stack.envoy.stats()).get(CONNECT_FAILS, 0)
    while time.monotonic() - cut_at < cut_s:
        await asyncio.sleep(0.2)
        now = (await stack.envoy.stats()).get(CONNECT_FAILS, 0)
        attempts += [time.monotonic() - cut_at] * (now - fails)
        fails = now
    during = await stack.envoy_weights()
    await proxy.restore()
    restored = time.monotonic()

    async def resynced() -> bool:
        return await stack.envoy_weights() == dict(zip(names, DURING, strict=True))

    await eventually(resynced, timeout=45, what="Envoy to get the change made in the cut")
    return Cut(cut_s=cut_s, during=during, attempts=attempts, resync_s=time.monotonic() - restored)


def gaps(cut: Cut) -> list[float]:
    """Seconds between the cut, each reconnect attempt and the end of the cut."""
    times = [0.0, *cut.attempts, cut.cut_s]
    return [round(b - a, 1) for a, b in itertools.pairwise(times)]


async def test_envoy_serves_through_a_network_cut_and_reconnects_within_the_back_off(
    tmp_path: Path,
) -> None:
    # One cut long enough for Envoy's back-off to reach its cap (0.25 s doubling to 5 s takes
    # about 4 s; Envoy's own 30 s cap would show as a gap over 5 s in the 12 s after that),
    # with load through it: serving through the cut and the back-off are one run.
    stack = fault_stack(tmp_path)
    proxy = CuttableProxy(target=stack.control_plane.xds_port)
    try:
        await behind_proxy(stack, proxy, tmp_path)
        names = list(stack.backends.addresses)
        async with SteadyLoad(stack.url) as load:
            await asyncio.sleep(1)
            connections = proxy.connections
            cut = await cut_and_restore(stack, proxy, cut_s=CUT_S)
            await asyncio.sleep(1)
        counts = load.counts()
        record(
            f"control plane cut off from Envoy for {CUT_S:.0f} s (network)",
            counts,
            recover_s=cut.resync_s,
            reconnect_gaps_s=gaps(cut),
        )
        assert counts.failed == 0, (counts, load.failures()[:5])
        assert cut.during == dict(zip(names, BEFORE, strict=True)), cut.during
        assert proxy.connections > connections  # a new connection, not a resumed one
        # Jittered, each wait below the cap; 0.2 s of polling and a connect on top.
        assert max(gaps(cut)) <= MAX_BACK_OFF_S + 0.5, gaps(cut)
        assert cut.resync_s <= MAX_BACK_OFF_S + 1.5, cut.resync_s
    finally:
        await stack.close()
        await proxy.close()
