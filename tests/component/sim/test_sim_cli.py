"""The CLI: ``xds-control sim`` runs a fleet and changes faults on a running one."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp

from xds_lab.harness.ports import free_port


async def test_sim_command_runs_a_fleet_and_injects_then_clears_a_fault(tmp_path: Path) -> None:
    control, port = free_port(), free_port()
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        f"control_port: {control}\nservers: [{{name: one, profile: vllm-h100, port: {port}}}]\n"
    )
    exe = [str(Path(sys.executable).parent / "xds-control")]
    proc = await asyncio.create_subprocess_exec(
        *exe,
        "sim",
        "--fleet",
        str(fleet),
        "--duration",  # a guard only: the test ends it; each CLI call below is a new process,
        "120",  # seconds to start on a loaded machine, so 20 s ran out mid-test there
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        banner = (await asyncio.wait_for(proc.stdout.readuntil(b"Ctrl-C"), 60)).decode()
        assert "one" in banner
        assert f"127.0.0.1:{port}" in banner

        async def cli(*args: str) -> tuple[int, str]:
            child = await asyncio.create_subprocess_exec(
                *exe,
                "-o",
                "json",
                "sim",
                "--control",
                f"http://127.0.0.1:{control}",
                "--server",
                "one",
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await child.communicate()
            return child.returncode or 0, out.decode()

        code, out = await cli("--fault", "error_rate=1")
        assert code == 0
        assert '"error_rate": 1.0' in out
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}/v1/completions"
            async with http.post(url, json={"prompt": "a b", "max_tokens": 1}) as resp:
                assert resp.status == 500
            assert (await cli("--clear"))[0] == 0
            async with http.post(url, json={"prompt": "a b", "max_tokens": 1}) as resp:
                assert resp.status == 200
        assert (await cli("--fault", "slowdown=0.5"))[0] == 2  # invalid: refused with a message
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 10) is not None
