"""The control loop serves a DNS pool's resolved addresses (``localhost`` through the system
resolver), and a config reload that leaves a pool's discovery settings alone keeps its source
(a Kubernetes watch is not listed again for an unrelated edit)."""

from __future__ import annotations

import os
from pathlib import Path

from xds_control.cache import MemorySnapshotCache
from xds_control.config import load_config
from xds_control.control import ControlLoop

CONFIG = """\
pools:
  - name: chat
    dns: {{hosts: ["localhost:8000"], weight: {weight}}}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{{name: all, pool: chat}}]
"""


def write(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


async def test_a_dns_pool_is_served_and_its_source_survives_an_unrelated_reload(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    write(path, CONFIG.format(weight=7))
    loop = ControlLoop(config=load_config(path), config_path=path, cache=MemorySnapshotCache())
    await loop.step()
    served = loop.state.endpoints["chat"]
    assert "127.0.0.1:8000" in {e.address for e in served}
    assert {e.weight for e in served} == {7}
    source = loop._sources["chat"]

    write(path, CONFIG.format(weight=7).replace("10000", "10001"))  # the listener only
    await loop.step()
    assert loop.state.config.listeners[0].address == "127.0.0.1:10001"
    assert loop._sources["chat"] is source

    write(path, CONFIG.format(weight=9))
    await loop.step()
    assert loop._sources["chat"] is not source
    assert {e.weight for e in loop.state.endpoints["chat"]} == {9}
