"""Sidecar mode: the control plane listens on the very socket Envoy's bootstrap dials, on the
volume both containers mount. A mismatch shows only in a cluster, as an Envoy that never gets a
config, so the chart's values and the plain manifest are both held to it here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from component.deploy.helm_chart import CHART, ROOT, validate, values
from xds_control.config.serving import parse_xds_address
from xds_control.xds import build_bootstrap

EXAMPLE = ROOT / "deploy" / "examples" / "sidecar" / "envoy-with-xds-control.yaml"


def _pipe(bootstrap: dict[str, Any]) -> Path:
    (cluster,) = bootstrap["static_resources"]["clusters"]
    (locality,) = cluster["load_assignment"]["endpoints"]
    (endpoint,) = locality["lb_endpoints"]
    return Path(endpoint["endpoint"]["address"]["pipe"]["path"])


def _socket(xds_address: str) -> Path:
    path = parse_xds_address(xds_address)
    assert isinstance(path, Path), f"{xds_address} is not a Unix socket"
    return path


def test_chart_sidecar_values_listen_where_the_bootstrap_dials() -> None:
    data = values(CHART / "ci" / "sidecar-values.yaml")
    assert data["mode"] == "sidecar"
    socket = _socket(data["config"]["xds_address"])
    bootstrap = yaml.safe_load((CHART / "files" / "envoy-bootstrap-sidecar-uds.yaml").read_text())
    assert _pipe(bootstrap) == socket
    # On the shared emptyDir, which both containers mount at sidecar.socketDir.
    assert socket.parent == Path(data["sidecar"]["socketDir"])
    # And the bootstrap is what `xds-control bootstrap --sidecar --socket PATH` writes.
    assert bootstrap == build_bootstrap(
        node_id="sidecar",
        node_cluster="sidecar",
        xds_host="127.0.0.1",
        xds_port=18000,
        xds_pipe=str(socket),
    )


def test_chart_ships_the_repositorys_sidecar_bootstrap() -> None:
    shipped = (CHART / "files" / "envoy-bootstrap-sidecar-uds.yaml").read_text()
    assert shipped == (ROOT / "envoy" / "bootstrap-sidecar-uds.yaml").read_text()


def test_chart_mounts_the_socket_volume_at_socket_dir_in_both_containers() -> None:
    mount = r"- name: xds-socket\n\s+mountPath: \{\{ \.Values\.sidecar\.socketDir \}\}"
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    sidecar = (CHART / "templates" / "sidecar-deployment.yaml").read_text()
    assert re.search(mount, helpers), "the xds-control container"
    envoy = sidecar.split("- name: envoy", 1)[1]
    assert re.search(mount, envoy), "the Envoy container"
    assert "/etc/envoy/bootstrap.yaml" in envoy


def _example() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(EXAMPLE.read_text()) if doc]


def _by_name(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_example_manifest_puts_both_containers_on_one_socket(tmp_path: Path) -> None:
    docs = _example()
    config_map = _by_name(docs, "ConfigMap", "xds-control-config")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    code, output = validate(config, folder=tmp_path)
    assert code == 0, output
    socket = _socket(config["xds_address"])
    bootstrap = _by_name(docs, "ConfigMap", "envoy-sidecar-bootstrap")["data"]["bootstrap.yaml"]
    assert _pipe(yaml.safe_load(bootstrap)) == socket

    pod = _by_name(docs, "Deployment", "llm-gateway")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    containers = {c["name"]: c for c in pod["containers"]}
    assert set(containers) == {"xds-control", "envoy"}
    for container in containers.values():
        mounts = {m["name"]: Path(m["mountPath"]) for m in container["volumeMounts"]}
        shared = [name for name, path in mounts.items() if path == socket.parent]
        assert len(shared) == 1, f"{container['name']} does not mount {socket.parent}"
        assert "emptyDir" in volumes[shared[0]]
    # The socket's mode is 0660: Envoy gets in through the group both containers share.
    assert pod["securityContext"]["runAsGroup"] == pod["securityContext"]["fsGroup"]
