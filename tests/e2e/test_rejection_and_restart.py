"""What must not break: a config Envoy rejects, a bad edit, a control-plane crash."""

from __future__ import annotations

import asyncio

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, traffic, weighted_config

OVERSIZED = "(tenant|team|org)-[a-z0-9]{1,40}-(prod|staging|dev){1,3}"
"""Valid RE2 (so `validate` accepts it) whose compiled program (188) is over Envoy's default
limit of 100, a runtime setting the control plane cannot know: Envoy rejects the route table."""


async def rds_state(stack: EchoStack, node_id: str = "envoy-0") -> dict[str, object]:
    streams = await stack.control_plane.get_json("/v1/streams")
    stream = next(s for s in streams if s["node_id"] == node_id)
    rds: dict[str, object] = next(t for t in stream["types"] if t["type"] == "RDS")
    return rds


@BOTH_PROTOCOLS
async def test_rejected_update_keeps_envoy_on_last_good_config(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 10]))
    before = await rds_state(stack)
    assert before["nacks"] == 0

    stack.write_config(
        weighted_config(
            stack, [10, 10], match={"headers": [{"name": "x-tenant", "regex": OVERSIZED}]}
        )
    )

    async def nacked() -> bool:
        return (await rds_state(stack))["nacks"] == 1

    await eventually(nacked, what="Envoy to NACK the route table")
    rds = await rds_state(stack)
    # Envoy's own error text, kept for operators.
    assert "max program size" in str(rds["last_error"]), rds
    assert rds["acked_version"] == before["acked_version"]

    # Envoy still routes with the previous table: a request without x-tenant still matches.
    counts = await traffic(stack, count=40)
    assert sum(v for k, v in counts.items() if k.startswith("127.0.0.1")) == 40, counts

    # No loop: the rejected version is not sent again.
    responses = rds["responses"]
    await asyncio.sleep(3)
    rds = await rds_state(stack)
    assert rds["responses"] == responses
    assert rds["nacks"] == 1

    # A fixed config is accepted again.
    stack.write_config(weighted_config(stack, [10, 10]))

    async def accepted() -> bool:
        state = await rds_state(stack)
        return state["acked_version"] == state["sent_version"] == before["acked_version"]

    await eventually(accepted, what="Envoy to ACK the fixed route table")


@BOTH_PROTOCOLS
async def test_invalid_edit_is_rejected_and_last_good_config_served(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 30]))
    envoy = stack.envoys[0]
    version = (await stack.control_plane.get_json("/v1/status"))["version"]

    stack.write_config(weighted_config(stack, [0, 30]))

    async def rejected() -> bool:
        status = await stack.control_plane.get_json("/v1/status")
        return bool(status["config_error"])

    await eventually(rejected, what="the bad edit to be rejected")
    status = await stack.control_plane.get_json("/v1/status")
    assert "pools[0].endpoints[0].weight" in status["config_error"]
    assert status["version"] == version
    hosts = {h.address: h.weight for h in await envoy.cluster_hosts("chat")}
    assert sorted(hosts.values()) == [10, 30]
    metrics = await stack.control_plane.metrics()
    assert 'xds_control_config_reloads_total{result="rejected"} 1.0' in metrics


@BOTH_PROTOCOLS
async def test_envoy_survives_control_plane_crash_and_resyncs_without_churn(
    stack: EchoStack,
) -> None:
    await stack.start(weighted_config(stack, [10, 30]))
    envoy = stack.envoys[0]
    status = await stack.control_plane.get_json("/v1/status")
    stats_before = await envoy.stats()

    stack.control_plane.process.kill()
    await stack.control_plane.process.stop()
    counts = await traffic(stack, count=200)
    assert sum(v for k, v in counts.items() if k.startswith("127.0.0.1")) == 200, counts

    await stack.restart_control_plane()

    async def reconnected() -> bool:
        streams = await stack.control_plane.get_json("/v1/streams")
        return any(s["node_id"] == "envoy-0" and len(s["types"]) == 4 for s in streams)

    await eventually(reconnected, timeout=30, what="Envoy to reconnect")
    assert (await stack.control_plane.get_json("/v1/status"))["version"] == status["version"]
    streams = await stack.control_plane.get_json("/v1/streams")
    for state in streams[0]["types"]:
        assert state["responses"] == 0, state  # Envoy already had every version: nothing resent
    stats = await envoy.stats()
    for name in ("cluster_manager.cluster_modified", "listener_manager.listener_modified"):
        assert stats[name] == stats_before[name], name
    counts = await traffic(stack, count=100)
    assert sum(v for k, v in counts.items() if k.startswith("127.0.0.1")) == 100, counts
