"""A control-plane restart with a changed config (both xDS variants): Envoy ends on the new
config, nothing is left warming, and no cluster that had endpoints ever shows none."""

from __future__ import annotations

import asyncio
import json

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, traffic
from e2e.two_pools import two_pool_config, watch
from xds_lab.harness.backends import BACKEND_HEADER
from xds_lab.harness.traffic import count_backends


@BOTH_PROTOCOLS
async def test_restart_with_a_changed_config_lands_cleanly(stack: EchoStack) -> None:
    await stack.start(two_pool_config(stack, chat=10, extra=10))
    envoy = stack.envoys[0]
    await stack.control_plane.stop()
    # While it is down: a new weight for chat, pool extra and its route gone, pool fresh added.
    stack.write_config(two_pool_config(stack, chat=30, extra=None, fresh=5))
    done = asyncio.Event()
    watcher = asyncio.create_task(watch(envoy, done))

    await stack.restart_control_plane()

    async def landed() -> bool:
        chat = [h.weight for h in await envoy.cluster_hosts("chat")]
        fresh = [h.weight for h in await envoy.cluster_hosts("fresh")]
        routes = await envoy.admin_get("/config_dump?resource=dynamic_route_configs")
        routed = '"cluster": "fresh"' in routes and '"cluster": "extra"' not in routes
        return routed and chat == [30] and fresh == [5] and not await envoy.cluster_hosts("extra")

    await eventually(landed, timeout=30, what="Envoy to land on the new config")
    await asyncio.sleep(0.3)
    done.set()
    seen = await watcher

    assert seen.polls > 5, seen
    assert seen.emptied == [], seen
    if stack.ads == "delta":
        # Delta names what Envoy has, so the server keeps extra until the new routes are in.
        assert seen.dangling == [], seen
        # Two CDS responses on the new stream: pool fresh at once; pool extra's removal only
        # after Envoy ACKed the route table without it.
        [stream] = await stack.control_plane.get_json("/v1/streams")
        types = {t["type"]: t for t in stream["types"]}
        assert types["CDS"]["responses"] == 2, types
        assert types["CDS"]["acked_at"] > types["RDS"]["acked_at"], types
    assert (await envoy.stats())["cluster_manager.warming_clusters"] == 0
    statuses = json.loads(await envoy.admin_get("/clusters?format=json"))["cluster_statuses"]
    assert all(s.get("host_statuses") for s in statuses), statuses
    assert await traffic(stack, count=20) == {stack.backends.address(0): 20}
    fresh = await count_backends(
        url=f"{stack.url}/fresh/v1/completions",
        count=20,
        headers_for=lambda i: {"x-prefix-hash": f"k-{i}"},
        backend_header=BACKEND_HEADER,
    )
    assert fresh == {stack.backends.address(1): 20}
