"""Mutual TLS on the xDS port with a real Envoy: a client certificate from the CA that names
the node syncs and serves traffic; with ``verify_node_id`` an Envoy whose node id its
certificate does not name gets nothing (its stream ends with PERMISSION_DENIED); a server
certificate renewed on disk is what a new Envoy's connection gets, while a connected Envoy's
stream keeps taking changes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from e2e.stack import EchoStack, eventually, traffic, weighted_config
from e2e.tls_ca import TestCa
from xds_control.xds.bootstrap import XdsTls
from xds_lab.harness.envoy import EnvoyProcess


def tls_config(stack: EchoStack, ca: TestCa) -> dict[str, Any]:
    server = ca.server()
    tls = {
        "cert_file": str(server.cert_file),
        "key_file": str(server.key_file),
        "client_ca_file": str(ca.ca_file),
        "verify_node_id": True,
    }
    return {**weighted_config(stack, [1, 1]), "tls": tls}


def envoy(stack: EchoStack, ca: TestCa, *, node_id: str, named: str, workdir: Path) -> EnvoyProcess:
    client = ca.issue(named, uris=(f"spiffe://test.local/ns/llm/{named}",))
    tls = XdsTls(
        ca_file=str(ca.ca_file),
        cert_file=str(client.cert_file),
        key_file=str(client.key_file),
        server_name="localhost",
    )
    process = EnvoyProcess(
        workdir=workdir, xds_port=stack.control_plane.xds_port, node_id=node_id, tls=tls
    )
    stack.envoys.append(process)
    return process


async def test_envoy_with_a_client_certificate_syncs_over_mtls(
    stack: EchoStack, tmp_path: Path
) -> None:
    ca = TestCa(tmp_path / "pki")
    await stack.start(tls_config(stack, ca), envoys=0)
    good = envoy(stack, ca, node_id="envoy-0", named="envoy-0", workdir=tmp_path / "good")
    await good.start()
    await good.wait_live()
    served = await traffic(stack, count=20)
    assert sum(served.values()) == 20
    [stream] = await stack.control_plane.get_json("/v1/streams")
    assert stream["node_id"] == "envoy-0"


async def test_a_node_id_its_certificate_does_not_name_is_refused(
    stack: EchoStack, tmp_path: Path
) -> None:
    ca = TestCa(tmp_path / "pki")
    await stack.start(tls_config(stack, ca), envoys=0)
    liar = envoy(stack, ca, node_id="envoy-1", named="envoy-0", workdir=tmp_path / "liar")
    await liar.start()
    await asyncio.sleep(3)  # several reconnect attempts (back-off from 0.25 s)
    assert (await liar.admin_get("/ready")).strip() != "LIVE"
    # A reconnect attempt may be listed for the moment before its first request is refused;
    # none ever names a node or subscribes to anything.
    streams = await stack.control_plane.get_json("/v1/streams")
    assert all(not s["node_id"] and not s["types"] for s in streams), streams
    stats = await liar.stats()
    assert stats.get("cluster_manager.cds.update_success", 0) == 0
    log = (stack.workdir / "xds-control-0.log").read_text()
    assert "node refused" in log
    assert "envoy-1" in log


async def test_a_renewed_server_certificate_serves_new_envoys_and_keeps_the_connected_one(
    stack: EchoStack, tmp_path: Path
) -> None:
    ca = TestCa(tmp_path / "pki")
    config = tls_config(stack, ca)
    await stack.start(config, envoys=0)
    first = envoy(stack, ca, node_id="envoy-0", named="envoy-0", workdir=tmp_path / "first")
    await first.start()
    await first.wait_live()

    ca.server()  # renewed in place: a new key and certificate from the same CA
    stack.write_config({**config, **weighted_config(stack, [7, 3])})

    async def first_runs_the_change() -> bool:
        return set((await stack.envoy_weights(envoy=first)).values()) == {7, 3}

    await eventually(first_runs_the_change, what="the connected Envoy running the change")
    assert (await first.stats())["control_plane.connected_state"] == 1
    second = envoy(stack, ca, node_id="envoy-1", named="envoy-1", workdir=tmp_path / "second")
    await second.start()
    await second.wait_live()  # a handshake with the renewed certificate
    log = (stack.workdir / "xds-control-0.log").read_text()
    assert "tls certificates reloaded" in log
    assert "rejected" not in log
