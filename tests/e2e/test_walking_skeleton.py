"""The walking skeleton through a real Envoy: connect, proxy, weights, reloads, two Envoys."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, traffic, weighted_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.traffic import shares


@BOTH_PROTOCOLS
async def test_envoy_syncs_proxies_and_shows_maglev_and_weights(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 30]))
    envoy = stack.envoys[0]

    counts = await traffic(stack, count=50)
    assert sum(counts[stack.backends.address(i)] for i in range(2)) == 50, counts

    dump = await envoy.config_dump()
    clusters = [
        c["cluster"]
        for cfg in dump["configs"]
        if cfg["@type"].endswith("ClustersConfigDump")
        for c in cfg.get("dynamic_active_clusters", [])
    ]
    chat = next(c for c in clusters if c["name"] == "chat")
    assert chat["lb_policy"] == "MAGLEV"
    assert chat["type"] == "EDS"
    hosts = {h.address: h.weight for h in await envoy.cluster_hosts("chat")}
    assert hosts == {stack.backends.address(0): 10, stack.backends.address(1): 30}


@BOTH_PROTOCOLS
async def test_shares_follow_weights_and_change_without_restart(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 30]))
    low, high = stack.backends.address(0), stack.backends.address(1)

    counts = await traffic(stack, count=2000)
    share = shares(counts)
    assert abs(share[low] - 0.25) < 0.04, share
    assert abs(share[high] - 0.75) < 0.04, share

    # The same key lands on the same backend while the weights stay the same.
    sticky = await traffic(stack, count=200, key=lambda i: f"prefix-{i % 20}")
    again = await traffic(stack, count=200, key=lambda i: f"prefix-{i % 20}")
    assert sticky == again

    stack.write_config(weighted_config(stack, [30, 10]))
    envoy = stack.envoys[0]

    async def reweighted() -> bool:
        hosts = {h.address: h.weight for h in await envoy.cluster_hosts("chat")}
        return hosts == {low: 30, high: 10}

    await eventually(reweighted, what="Envoy to apply the new weights")
    share = shares(await traffic(stack, count=2000))
    assert abs(share[low] - 0.75) < 0.04, share
    assert abs(share[high] - 0.25) < 0.04, share
    assert stack.control_plane.process.running


@BOTH_PROTOCOLS
async def test_two_envoys_stay_in_sync(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [20, 20]), envoys=2)
    first, second = stack.envoys

    async def both(expected: dict[str, int]) -> bool:
        for envoy in (first, second):
            hosts = {h.address: h.weight for h in await envoy.cluster_hosts("chat")}
            if hosts != expected:
                return False
        return True

    a, b = stack.backends.address(0), stack.backends.address(1)
    await eventually(lambda: both({a: 20, b: 20}), what="both Envoys in sync")
    for weights in ([5, 50], [50, 5], [7, 7]):
        stack.write_config(weighted_config(stack, weights))
        expected = {a: weights[0], b: weights[1]}
        await eventually(lambda: both(expected), what=f"weights {weights}")  # noqa: B023

    streams = await stack.control_plane.get_json("/v1/streams")
    assert sorted(s["node_id"] for s in streams) == ["envoy-0", "envoy-1"]
    assert {s["ads"] for s in streams} == {stack.ads}
    versions = {s["node_id"]: {t["type"]: t["acked_version"] for t in s["types"]} for s in streams}
    assert versions["envoy-0"] == versions["envoy-1"]


@BOTH_PROTOCOLS
async def test_endpoints_file_edits_reach_envoy_and_bad_edits_do_not(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 10]))
    a, b = stack.backends.address(0), stack.backends.address(1)
    endpoints = stack.workdir / "endpoints.yaml"
    endpoints.write_text(f"endpoints:\n  - {{address: '{a}', weight: 40}}\n")
    config = weighted_config(stack, [1, 1])
    del config["pools"][0]["endpoints"]
    config["pools"][0]["endpoints_file"] = "endpoints.yaml"
    stack.write_config(config)
    envoy = stack.envoys[0]

    async def hosts_are(expected: dict[str, int]) -> bool:
        return {h.address: h.weight for h in await envoy.cluster_hosts("chat")} == expected

    await eventually(lambda: hosts_are({a: 40}), what="the endpoints file to be served")
    endpoints.write_text(
        f"endpoints:\n  - {{address: '{a}', weight: 40}}\n  - {{address: '{b}', weight: 20}}\n"
    )
    await eventually(lambda: hosts_are({a: 40, b: 20}), what="the added endpoint")

    endpoints.write_text("endpoints:\n  - {address: 'not-an-ip:1', weight: 20}\n")

    async def rejected() -> bool:
        status = await stack.control_plane.get_json("/v1/status")
        return "chat" in status["discovery_errors"]

    await eventually(rejected, what="the bad endpoints file to be rejected")
    status = await stack.control_plane.get_json("/v1/status")
    assert "endpoints[0].address" in status["discovery_errors"]["chat"]
    assert await hosts_are({a: 40, b: 20})


@BOTH_PROTOCOLS
async def test_xdsctl_shows_envoys_synced_and_the_served_weights(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 30]), envoys=2)
    admin = stack.control_plane.admin_url

    def xdsctl(*args: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", "from xds_control.cli.xdsctl import main; main()", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    async def synced() -> bool:
        rows = json.loads(
            await asyncio.to_thread(xdsctl, "--admin", admin, "-o", "json", "proxy-status")
        )
        return sorted(r["name"] for r in rows) == ["envoy-0", "envoy-1"] and all(
            r[t] == "SYNCED" for r in rows for t in ("CDS", "LDS", "EDS", "RDS")
        )

    await eventually(synced, what="xdsctl proxy-status to show both Envoys SYNCED")
    table = xdsctl("--admin", admin, "proxy-status")
    assert "envoy-1" in table
    assert "SYNCED" in table
    endpoints = json.loads(xdsctl("--admin", admin, "-o", "json", "endpoints", "chat"))
    assert {e["address"]: e["weight"] for e in endpoints["chat"]} == {
        stack.backends.address(0): 10,
        stack.backends.address(1): 30,
    }


def test_xdsctl_says_when_the_control_plane_is_unreachable() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from xds_control.cli.xdsctl import main; main()",
            "--admin",
            f"http://127.0.0.1:{free_port()}",
            "proxy-status",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert "cannot reach the control plane" in result.stderr
