"""`xds-control validate` checks kubernetes and dns pools as fields (no cluster, no resolver
needed where a config is validated) and refuses bad values naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_runs import validate

CONFIG = """\
pools:
  - name: chat
    kubernetes: {namespace: llm, service: vllm, port: http}
  - name: batch
    dns: {hosts: ["vllm-0.does-not-resolve.invalid:8000"], refresh_s: 10}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: all, pool: chat}, {name: b, pool: batch}]
"""


def test_validate_accepts_kubernetes_and_dns_pools(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    result = validate(path)
    assert result.returncode == 0, result.stderr
    assert "2 pools" in result.stdout


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("service: vllm", "service: Vllm_1"), "pools[0].kubernetes.service"),
        (("refresh_s: 10", "refresh_s: -1"), "pools[1].dns.refresh_s"),
        ((":8000", ""), "pools[1].dns.hosts[0]"),
    ],
)
def test_validate_refuses_bad_values_naming_the_field(
    tmp_path: Path, edit: tuple[str, str], field: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace(*edit))
    result = validate(path)
    assert result.returncode == 2
    assert field in result.stderr


@pytest.mark.parametrize(
    ("pool", "refused"),
    [
        ("kubernetes: {namespace: llm, service: vllm}", None),
        (
            "kubernetes: {namespace: llm, service: vllm, pod_metadata: false}",
            "pools[0].kubernetes.pod_metadata",
        ),
        ("dns: {hosts: ['vllm-0.internal:8000']}", "pools[0].dns"),
    ],
    ids=["kubernetes", "kubernetes-without-pods", "dns"],
)
def test_a_single_device_pool_needs_a_source_that_names_each_gpu(
    tmp_path: Path, pool: str, refused: str | None
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"pools:\n  - name: mig\n    single_device: true\n    {pool}\n"
        "listeners:\n  - {name: gw, address: 127.0.0.1:10000, routes: [{name: all, pool: mig}]}\n"
    )
    result = validate(path)
    if refused is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2
        assert refused in result.stderr
        assert "single_device" in result.stderr
