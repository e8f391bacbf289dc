"""Make-before-break on a live edit: removing a pool and the route to it in one edit never
leaves a route naming a cluster Envoy no longer has (both xDS variants)."""

from __future__ import annotations

import asyncio

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually
from e2e.two_pools import keep_sending, two_pool_config, watch


async def acked_at(stack: EchoStack) -> dict[str, float]:
    [stream] = await stack.control_plane.get_json("/v1/streams")
    return {t["type"]: t["acked_at"] for t in stream["types"]}


@BOTH_PROTOCOLS
async def test_removing_a_pool_and_its_route_never_strands_a_route(stack: EchoStack) -> None:
    await stack.start(two_pool_config(stack))
    envoy = stack.envoys[0]
    done = asyncio.Event()
    watcher = asyncio.create_task(watch(envoy, done))
    sender = asyncio.create_task(keep_sending(stack, "/extra/v1/completions", done))
    await asyncio.sleep(0.5)
    before = await acked_at(stack)

    stack.write_config(two_pool_config(stack, extra=None))

    async def removed() -> bool:
        return (
            await envoy.cluster_hosts("extra") == []
            and (await acked_at(stack))["CDS"] > before["CDS"]
        )

    await eventually(removed, what="the extra pool to leave Envoy")
    await asyncio.sleep(0.3)
    done.set()
    seen, answers = await watcher, await sender

    assert seen.polls > 10, seen
    assert seen.dangling == [], seen
    assert seen.emptied == [], seen
    # Every request to /extra was answered: by extra, then (its route gone) by chat.
    assert set(answers) <= {stack.backends.address(0), stack.backends.address(1)}, answers
    assert (await envoy.stats())["http.gateway.no_cluster"] == 0
    # The cluster went only after Envoy had ACKed the route table that no longer names it.
    after = await acked_at(stack)
    assert after["RDS"] > before["RDS"]
    assert after["CDS"] > after["RDS"]
