"""`helm lint` and `helm template` (helm v4, which `make setup` installs) over every ci
scenario: the chart lints with warnings as errors; every object it renders is of a kind the
field check knows and uses only fields Kubernetes has; the rendered ConfigMap holds
values.config unchanged, a config `xds-control validate` passes; and the schema stops a wrong
type at install. Without a helm (no `make setup`, no ``HELM_BIN``) these skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from component.deploy.helm_chart import CHART, CI_FILES, validate, values
from component.deploy.helm_cli import KUBE_VERSION, find_helm, render, run_helm
from component.deploy.kube_schema import problems

HELM = find_helm()
pytestmark = pytest.mark.skipif(HELM is None, reason="no helm: run `make helm` or set HELM_BIN")
IDS = [p.name for p in CI_FILES]
SIDECAR = CHART / "ci" / "sidecar-values.yaml"


@pytest.fixture
def helm() -> Path:
    assert HELM is not None
    return HELM


def _one(docs: list[dict[str, Any]], *, kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


@pytest.mark.parametrize("ci_file", CI_FILES, ids=IDS)
def test_lint_passes_with_warnings_as_errors(helm: Path, ci_file: Path) -> None:
    run = run_helm(
        helm, "lint", "--strict", str(CHART), "-f", str(ci_file), "--kube-version", KUBE_VERSION
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[WARNING]" not in run.stdout, run.stdout


@pytest.mark.parametrize("ci_file", CI_FILES, ids=IDS)
def test_rendered_configmap_is_values_config_and_valid(
    helm: Path, ci_file: Path, tmp_path: Path
) -> None:
    config_map = _one(render(helm, values_file=ci_file), kind="ConfigMap", name="xds-control")
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert config == values(ci_file)["config"]
    code, output = validate(config, folder=tmp_path)
    assert code == 0, output


@pytest.mark.parametrize("ci_file", CI_FILES, ids=IDS)
def test_rendered_objects_use_only_real_fields(helm: Path, ci_file: Path) -> None:
    docs = render(helm, values_file=ci_file)
    assert docs
    for doc in docs:
        assert problems(doc) == [], f"{doc['kind']} {doc['metadata']['name']}"


def test_cluster_wide_rbac_renders_real_objects(helm: Path) -> None:
    docs = render(
        helm, values_file=CHART / "ci" / "central-values.yaml", sets=("rbac.clusterWide=true",)
    )
    kinds = {d["kind"] for d in docs}
    assert {"ClusterRole", "ClusterRoleBinding"} <= kinds
    assert not {"Role", "RoleBinding"} & kinds
    for doc in docs:
        assert problems(doc) == [], f"{doc['kind']} {doc['metadata']['name']}"


POD_RULE_CASES = {
    "no-kubernetes-pool": ({"endpoints": [{"address": "10.0.0.1:8000"}]}, None, None),
    "pod-metadata": ({"kubernetes": {"namespace": "llm", "service": "vllm"}}, ["get"], None),
    "no-pod-metadata": (
        {"kubernetes": {"namespace": "llm", "service": "vllm", "pod_metadata": False}},
        None,
        None,
    ),
    "inference-pool": (
        {"inference_pool": {"namespace": "llm", "name": "llama"}},
        ["list", "watch"],
        ["get", "list", "watch"],
    ),
}


@pytest.mark.parametrize(
    ("source", "pod_verbs", "pool_verbs"), POD_RULE_CASES.values(), ids=POD_RULE_CASES.keys()
)
def test_the_role_grants_pods_and_inferencepools_only_to_pools_that_read_them(
    helm: Path,
    tmp_path: Path,
    source: dict[str, Any],
    pod_verbs: list[str] | None,
    pool_verbs: list[str] | None,
) -> None:
    base = values(CHART / "ci" / "central-values.yaml")["config"]
    pools = [{"name": "chat", **source}]
    config = {
        **base,
        "pools": pools,
        "listeners": [{**base["listeners"][0], "routes": [{"name": "default", "pool": "chat"}]}],
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump({"rbac": {"namespaces": ["llm"]}, "config": config}))
    (role,) = [d for d in render(helm, values_file=values_file) if d["kind"] == "Role"]
    verbs = {tuple(r["apiGroups"]) + tuple(r["resources"]): r["verbs"] for r in role["rules"]}
    assert verbs.pop(("discovery.k8s.io", "endpointslices")) == ["get", "list", "watch"]
    assert verbs.pop(("", "pods"), None) == pod_verbs
    assert verbs.pop(("inference.networking.k8s.io", "inferencepools"), None) == pool_verbs
    assert verbs == {}
    assert problems(role) == []


def test_the_role_grants_pods_and_inferencepools_when_pools_are_made_from_them(
    helm: Path, tmp_path: Path
) -> None:
    base = values(CHART / "ci" / "central-values.yaml")["config"]
    config = {
        **{key: value for key, value in base.items() if key != "pools"},
        "inference_pools": {"namespace": "llm"},
        "listeners": [{**base["listeners"][0], "routes": [{"name": "default", "pool": "llama"}]}],
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump({"rbac": {"namespaces": ["llm"]}, "config": config}))
    (role,) = [d for d in render(helm, values_file=values_file) if d["kind"] == "Role"]
    verbs = {tuple(r["apiGroups"]) + tuple(r["resources"]): r["verbs"] for r in role["rules"]}
    assert verbs[("", "pods")] == ["list", "watch"]
    assert verbs[("inference.networking.k8s.io", "inferencepools")] == ["get", "list", "watch"]


def test_rendered_sidecar_pod_shares_the_socket_folder(helm: Path) -> None:
    docs = render(helm, values_file=SIDECAR)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    socket_dir = values(SIDECAR)["sidecar"]["socketDir"]
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        paths = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert paths.get("xds-socket") == socket_dir, container["name"]


def test_rendered_sidecar_bootstrap_is_the_charts_file(helm: Path) -> None:
    """Indentation through `nindent` cannot bend the bootstrap Envoy starts with."""
    bootstrap = _one(render(helm, values_file=SIDECAR), kind="ConfigMap", name="xds-control-envoy")
    rendered = yaml.safe_load(bootstrap["data"]["bootstrap.yaml"])
    chart_file = CHART / "files" / "envoy-bootstrap-sidecar-uds.yaml"
    assert rendered == yaml.safe_load(chart_file.read_text())


def test_install_refuses_a_wrong_type_naming_the_field(helm: Path) -> None:
    run = run_helm(
        helm,
        *("template", "xds-control", str(CHART), "--set", "replicaCount=two"),
        *("--kube-version", KUBE_VERSION),
    )
    assert run.returncode != 0
    assert "replicaCount" in run.stderr


REPLICAS = CHART / "ci" / "replicas-values.yaml"


def test_replicas_reach_the_picker_through_the_service(helm: Path) -> None:
    docs = render(helm, values_file=REPLICAS)
    service = _one(docs, kind="Service", name="xds-control")
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports["picker-0"] == (9002, "picker-0")
    deployment = _one(docs, kind="Deployment", name="xds-control")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "picker-0", "containerPort": 9002, "protocol": "TCP"} in container["ports"]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("config.gateways=null", "set config.gateways"),
        ('config.pools[0].picker={"address": "0.0.0.0:9002"}', "set picker.envoy_address"),
        ("config.control_planes=null", "set config.control_planes"),
    ],
)
def test_replicas_that_would_double_the_budget_or_miss_the_picker_do_not_render(
    helm: Path, change: str, says: str
) -> None:
    run = run_helm(helm, "template", "x", str(CHART), "-f", str(REPLICAS), "--set-json", change)
    assert run.returncode != 0
    assert says in run.stderr, run.stderr


def test_a_pools_tokenizer_is_mounted_where_its_config_says(helm: Path) -> None:
    """The replicas' picker reads the servers' KV events with the model's tokenizer: the pod
    mounts the volume the values name, read-only, at the path the pool's config gives."""
    docs = render(helm, values_file=REPLICAS)
    config = yaml.safe_load(_one(docs, kind="ConfigMap", name="xds-control")["data"]["config.yaml"])
    path = config["pools"][0]["picker"]["tokenizer"]
    spec = _one(docs, kind="Deployment", name="xds-control")["spec"]["template"]["spec"]
    [container] = spec["containers"]
    [mount] = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"])]
    assert mount["readOnly"] is True
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert volume["persistentVolumeClaim"] == {"claimName": "chat-model-tokenizer"}


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            'config.pools[0].picker.tokenizer="/etc/xds-control/tokenizers/llama"',
            "pool chat: picker.tokenizer /etc/xds-control/tokenizers/llama is under "
            "tokenizers.llama, which values does not mount (tokenizers: chat)",
        ),
        (
            'config.pools[0].picker.tokenizer="tokenizer"',
            "pool chat: picker.tokenizer tokenizer is relative to the config file's folder",
        ),
    ],
)
def test_a_tokenizer_the_pod_would_not_find_does_not_render(
    helm: Path, change: str, says: str
) -> None:
    run = run_helm(helm, "template", "x", str(CHART), "-f", str(REPLICAS), "--set-json", change)
    assert run.returncode != 0
    assert says in run.stderr, run.stderr
