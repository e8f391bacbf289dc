"""`xds-control validate` refuses a single-device pool whose MIG slices span GPUs, naming them."""

from __future__ import annotations

from pathlib import Path

from cli_runs import validate

CONFIG = """\
pools:
  - name: inline
    single_device: true
    endpoints:
      - {address: 10.0.0.1:8000, device: {gpu_uuid: GPU-aaaa, mig_instance: "1"}}
      - {address: 10.0.0.2:8000, device: {gpu_uuid: GPU-bbbb, mig_instance: "1"}}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: all, pool: inline}]
"""

ONE_GPU = """\
endpoints:
  - {address: 10.0.0.3:8000, device: {gpu_uuid: GPU-cccc, mig_instance: "1"}}
  - {address: 10.0.0.4:8000, device: {gpu_uuid: GPU-cccc, mig_instance: "2"}}
"""


def test_inline_endpoints_on_two_gpus_are_named(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    result = validate(path)
    assert result.returncode == 2, result
    assert "pools[0].endpoints" in result.stderr
    assert "GPU-aaaa: 10.0.0.1:8000; GPU-bbbb: 10.0.0.2:8000" in result.stderr


def test_an_endpoints_file_is_checked_too_and_one_gpu_passes(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    mixed = ONE_GPU.replace('GPU-cccc, mig_instance: "2"', 'GPU-dddd, mig_instance: "2"')
    (tmp_path / "eps.yaml").write_text(mixed)
    file_pool = "  - {name: file, single_device: true, endpoints_file: eps.yaml}\nlisteners:"
    path.write_text(CONFIG.replace("GPU-bbbb", "GPU-aaaa").replace("listeners:", file_pool))
    result = validate(path)
    assert result.returncode == 2, result
    assert "invalid endpoints" in result.stderr
    assert "GPU-cccc: 10.0.0.3:8000; GPU-dddd: 10.0.0.4:8000" in result.stderr

    (tmp_path / "eps.yaml").write_text(ONE_GPU)
    result = validate(path)
    assert result.returncode == 0, result.stderr
    assert "4 endpoints" in result.stdout
