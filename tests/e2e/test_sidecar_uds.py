"""Sidecar mode: the control plane serves ADS on a Unix socket only, and an Envoy whose
bootstrap (``xds-control bootstrap --sidecar``) names that socket syncs and serves traffic;
with the data path on, its access log reaches the control plane over the same socket."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path

from e2e.stack import EchoStack, eventually, traffic, weighted_config
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess


async def test_envoy_syncs_over_a_unix_socket_and_serves(stack: EchoStack, tmp_path: Path) -> None:
    socket = tmp_path / "run" / "ads.sock"
    socket.parent.mkdir()
    stack.control_plane = ControlPlaneProcess(
        config_path=stack.workdir / "config.yaml",
        workdir=stack.workdir,
        xds_address=f"unix://{socket}",
    )
    await stack.start(weighted_config(stack, [1, 1]), envoys=0)
    assert stat.S_IMODE(socket.stat().st_mode) == 0o660
    envoy = EnvoyProcess(workdir=tmp_path, xds_port=1, node_id="sidecar", xds_pipe=str(socket))
    stack.envoys.append(envoy)
    await envoy.start()
    await envoy.wait_live()
    served = await traffic(stack, count=40)
    assert sum(served.values()) == 40
    assert set(served) == set(stack.backends.addresses.values())
    [stream] = await stack.control_plane.get_json("/v1/streams")
    assert stream["node_id"] == "sidecar"


async def test_the_data_path_s_access_log_travels_the_same_socket(
    stack: EchoStack, tmp_path: Path
) -> None:
    socket = tmp_path / "run" / "ads.sock"
    socket.parent.mkdir()
    stack.control_plane = ControlPlaneProcess(
        config_path=stack.workdir / "config.yaml",
        workdir=stack.workdir,
        xds_address=f"unix://{socket}",
    )
    config = {**weighted_config(stack, [1, 1]), "signals": {"data_path": {"enabled": True}}}
    await stack.start(config, envoys=0)
    envoy = EnvoyProcess(workdir=tmp_path, xds_port=1, node_id="sidecar", xds_pipe=str(socket))
    stack.envoys.append(envoy)
    await envoy.start()
    await envoy.wait_live()
    assert sum((await traffic(stack, count=40)).values()) == 40

    async def counted() -> bool:
        found = re.search(
            r'^xds_control_data_path_entries_total\{outcome="counted"\} (\S+)$',
            await stack.control_plane.metrics(),
            re.M,
        )
        return found is not None and float(found.group(1)) == 40

    await eventually(counted, timeout=15, what="40 access-log entries over the socket")


def test_bootstrap_sidecar_names_the_socket() -> None:
    argv = ["bootstrap", "--node-id", "s", "--sidecar", "--socket", "/run/x/ads.sock"]
    result = subprocess.run(
        [sys.executable, "-m", "xds_control", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    cluster = json.loads(result.stdout)["static_resources"]["clusters"][0]
    [host] = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    assert host["endpoint"]["address"] == {"pipe": {"path": "/run/x/ads.sock"}}
