"""Node groups through real Envoys: two Envoys with different node clusters get different
listeners and pools from one control plane, and an unknown node gets the configured default."""

from __future__ import annotations

import json
from typing import Any

from e2e.stack import EchoStack, eventually
from xds_lab.harness.backends import BACKEND_HEADER
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.ports import free_port
from xds_lab.harness.traffic import count_backends


def groups_config(stack: EchoStack, *, team_port: int, chat_weight: int = 10) -> dict[str, Any]:
    backends = stack.backends
    return {
        "pools": [
            {
                "name": "chat",
                "endpoints": [{"address": backends.address(0), "weight": chat_weight}],
            },
            {"name": "code", "endpoints": [{"address": backends.address(1)}]},
        ],
        "listeners": [
            {
                "name": "edge",
                "address": f"127.0.0.1:{stack.listener_port}",
                "routes": [{"name": "chat", "pool": "chat"}],
            },
            {
                "name": "team",
                "address": f"127.0.0.1:{team_port}",
                "routes": [{"name": "code", "pool": "code"}],
            },
        ],
        "node_groups": [
            {"name": "edge", "match": {"cluster": "gateway"}, "listeners": ["edge"]},
            {"name": "team", "match": {"cluster": "team"}, "listeners": ["team"]},
        ],
        "unknown_nodes": {"group": "team"},
    }


async def add_envoy(stack: EchoStack, *, node_id: str, node_cluster: str) -> EnvoyProcess:
    envoy = EnvoyProcess(
        workdir=stack.workdir,
        xds_port=stack.control_plane.xds_port,
        node_id=node_id,
        node_cluster=node_cluster,
    )
    stack.envoys.append(envoy)  # the stack stops it
    await envoy.start()
    await envoy.wait_live()
    return envoy


async def served(envoy: EnvoyProcess) -> tuple[set[str], set[str]]:
    """The dynamic listeners and clusters ``envoy`` runs."""
    listeners = json.loads(await envoy.admin_get("/listeners?format=json"))
    clusters = json.loads(await envoy.admin_get("/clusters?format=json"))
    return (
        {item["name"] for item in listeners.get("listener_statuses", [])},
        {c["name"] for c in clusters.get("cluster_statuses", []) if c.get("added_via_api")},
    )


async def answered_by(port: int) -> set[str]:
    counts = await count_backends(
        url=f"http://127.0.0.1:{port}/v1/completions",
        count=20,
        headers_for=lambda i: {"x-prefix-hash": f"p{i}"},
        backend_header=BACKEND_HEADER,
    )
    return set(counts)


async def test_two_node_clusters_get_their_own_listeners_and_pools(stack: EchoStack) -> None:
    team_port = free_port()
    await stack.start(groups_config(stack, team_port=team_port), envoys=0)
    edge = await add_envoy(stack, node_id="edge-1", node_cluster="gateway")
    team = await add_envoy(stack, node_id="team-1", node_cluster="team")
    stranger = await add_envoy(stack, node_id="stray-1", node_cluster="elsewhere")

    assert await served(edge) == ({"edge"}, {"chat"})
    assert await served(team) == ({"team"}, {"code"})
    assert await served(stranger) == ({"team"}, {"code"})  # unknown_nodes: {group: team}
    assert await answered_by(stack.listener_port) == {stack.backends.address(0)}

    # A chat weight change reaches the edge Envoy; the team group's version does not move.
    streams = await stack.control_plane.get_json("/v1/streams")
    before = {s["node_id"]: s["types"] for s in streams}
    stack.write_config(groups_config(stack, team_port=team_port, chat_weight=40))

    async def edge_reweighted() -> bool:
        return [h.weight for h in await edge.cluster_hosts("chat")] == [40]

    await eventually(edge_reweighted, what="the edge Envoy to run chat's new weight")
    after = {s["node_id"]: s["types"] for s in await stack.control_plane.get_json("/v1/streams")}
    assert after["team-1"] == before["team-1"]
    assert after["edge-1"] != before["edge-1"]
