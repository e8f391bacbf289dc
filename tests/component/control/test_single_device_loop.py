"""A running control loop refuses a single-device pool's endpoints file once its MIG slices
span GPUs: the last good set stays served and the error names the endpoints."""

from __future__ import annotations

import os
from pathlib import Path

from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop

CONFIG = """\
pools:
  - {name: mig, single_device: true, endpoints_file: eps.yaml}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: all, pool: mig}]
"""


def endpoints(*gpus: str) -> str:
    rows = (
        f"  - {{address: 10.0.0.{i}:8000, device: {{gpu_uuid: {gpu}, mig_instance: '{i}'}}}}\n"
        for i, gpu in enumerate(gpus, 1)
    )
    return "endpoints:\n" + "".join(rows)


def write(path: Path, text: str) -> None:
    """Replace the file and move its mtime, so the source sees a change within one tick."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


async def test_mixed_gpus_keep_the_last_good_set_and_name_the_endpoints(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG)
    write(tmp_path / "eps.yaml", endpoints("GPU-a", "GPU-a"))
    path = tmp_path / "config.yaml"
    loop = ControlLoop(config=load_config(path), config_path=path, cache=MemorySnapshotCache())
    await loop.step()
    good = [e.address for e in loop.state.endpoints["mig"]]
    assert good == ["10.0.0.1:8000", "10.0.0.2:8000"]

    write(tmp_path / "eps.yaml", endpoints("GPU-a", "GPU-a", "GPU-b"))
    await loop.step()
    assert [e.address for e in loop.state.endpoints["mig"]] == good
    error = loop.state.discovery_errors["mig"]
    assert "GPU-a: 10.0.0.1:8000, 10.0.0.2:8000; GPU-b: 10.0.0.3:8000" in error

    write(tmp_path / "eps.yaml", endpoints("GPU-b", "GPU-b", "GPU-b"))
    await loop.step()
    assert len(loop.state.endpoints["mig"]) == 3
    assert "mig" not in loop.state.discovery_errors
