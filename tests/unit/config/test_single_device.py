"""A single-device pool refuses endpoints whose MIG slices sit on different GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from xds_control.config import parse_config
from xds_control.config.devices import Device, single_device_problem
from xds_control.discovery import Endpoint, endpoint_source
from xds_control.errors import ConfigError, DiscoveryError

A, B = "GPU-aaaa-1111", "GPU-bbbb-2222"


def config_text(devices: list[str | None], *, single_device: bool = True) -> str:
    rows = []
    for i, gpu in enumerate(devices):
        device = f", device: {{gpu_uuid: {gpu}, mig_instance: '{i}'}}" if gpu else ""
        rows.append(f"{{address: 10.0.0.{i + 1}:8000{device}}}")
    return f"""\
pools:
  - name: mig
    single_device: {str(single_device).lower()}
    endpoints: [{", ".join(rows)}]
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{{name: all, pool: mig}}]
"""


def test_slices_of_one_gpu_are_accepted() -> None:
    config = parse_config(text=config_text([A, A, A]))
    assert config.pools[0].endpoints[2].device == Device(gpu_uuid=A, mig_instance="2")


def test_mixed_gpus_are_refused_naming_the_endpoints_on_each() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text=config_text([A, B, A]))
    ((path, message),) = caught.value.problems
    assert path == "pools[0].endpoints"
    assert f"{A}: 10.0.0.1:8000, 10.0.0.3:8000" in message
    assert f"{B}: 10.0.0.2:8000" in message
    assert "'mig' is single_device" in message


def test_an_endpoint_without_a_gpu_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"gpu-uuid\) for 10\.0\.0\.2:8000"):
        parse_config(text=config_text([A, None]))


def test_a_pool_not_marked_single_device_takes_any_mix() -> None:
    parse_config(text=config_text([A, B, None], single_device=False))


def test_pure_check_is_quiet_for_one_gpu_and_names_both_problems() -> None:
    same = [("h:1", Device(gpu_uuid=A)), ("h:2", Device(gpu_uuid=A, mig_instance="3"))]
    assert single_device_problem(pool="p", endpoints=same) is None
    mixed = [*same, ("h:3", Device(gpu_uuid=B)), ("h:4", None)]
    problem = single_device_problem(pool="p", endpoints=mixed)
    assert problem is not None
    assert "2 different GPUs" in problem
    assert f"{B}: h:3" in problem
    assert "xds-control.io/gpu-uuid) for h:4" in problem


async def test_an_endpoints_file_across_gpus_is_a_discovery_error(tmp_path: Path) -> None:
    (tmp_path / "eps.yaml").write_text(
        "endpoints:\n"
        f"  - {{address: 10.0.0.1:8000, device: {{gpu_uuid: {A}, mig_instance: '1'}}}}\n"
        f"  - {{address: 10.0.0.2:8000, device: {{gpu_uuid: {B}, mig_instance: '1'}}}}\n"
    )
    text = config_text([]).replace("endpoints: []", "endpoints_file: eps.yaml")
    pool = parse_config(text=text).pools[0]
    with pytest.raises(DiscoveryError, match=rf"{A}: 10\.0\.0\.1:8000; {B}: 10\.0\.0\.2:8000"):
        await endpoint_source(pool, base=tmp_path).fetch()


async def test_an_endpoints_file_on_one_gpu_keeps_each_device(tmp_path: Path) -> None:
    (tmp_path / "eps.yaml").write_text(
        f"endpoints:\n  - {{address: 10.0.0.1:8000, device: {{gpu_uuid: {A}}}}}\n"
    )
    text = config_text([]).replace("endpoints: []", "endpoints_file: eps.yaml")
    endpoints = await endpoint_source(parse_config(text=text).pools[0], base=tmp_path).fetch()
    assert endpoints == (
        Endpoint(address="10.0.0.1:8000", host="10.0.0.1", port=8000, weight=10,
                 device=Device(gpu_uuid=A)),
    )  # fmt: skip


def test_a_source_that_cannot_name_devices_is_refused_for_a_single_device_pool() -> None:
    text = config_text([]).replace("endpoints: []", "dns: {hosts: ['vllm-0.internal:8000']}")
    with pytest.raises(ConfigError) as caught:
        parse_config(text=text)
    ((path, message),) = caught.value.problems
    assert path == "pools[0].dns"
    assert "an address says nothing of its GPU" in message
