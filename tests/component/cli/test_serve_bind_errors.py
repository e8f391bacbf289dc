"""`xds-control serve` on an address it cannot take: one line on stderr, exit 1, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from configs import ONE_POOL
from xds_lab.harness.ports import free_port


@pytest.mark.parametrize("flag", ["--xds-address", "--admin-address"])
def test_a_taken_port_is_one_clear_line(tmp_path: Path, flag: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(ONE_POOL)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        addresses = {
            name: f"127.0.0.1:{free_port()}" for name in ("--xds-address", "--admin-address")
        }
        addresses[flag] = f"127.0.0.1:{port}"
        argv = [sys.executable, "-m", "xds_control", "serve", "--config", str(config)]
        for name, value in addresses.items():
            argv += [name, value]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("xds-control serve:")]
    assert len(lines) == 1, run.stderr
    assert f"127.0.0.1:{port}" in lines[0]
