"""`xds-control serve` with the gRPC admin API configured: it answers on its own port; off
loopback without a token, serve refuses to start with one line; with one, calls need it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from xds_control.admin.v1 import admin_pb2 as pb
from xds_control.admin.v1 import admin_pb2_grpc
from xds_lab.harness.ports import free_port

CONFIG = """\
admin_grpc_address: {grpc}
pools:
  - name: chat
    endpoints: [{{address: 127.0.0.1:8001}}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{{name: all, pool: chat}}]
"""


def serve_argv(config: Path, *, admin: str) -> list[str]:
    return [
        sys.executable, "-m", "xds_control", "serve", "--config", str(config),
        "--xds-address", f"127.0.0.1:{free_port()}", "--admin-address", admin,
    ]  # fmt: skip


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A serve process with the gRPC admin API on loopback and a token from the environment."""
    grpc_port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(grpc=f"127.0.0.1:{grpc_port}"))
    env = {**os.environ, "XDS_CONTROL_ADMIN_TOKEN": "s3cret"}
    process = subprocess.Popen(
        serve_argv(config, admin=f"127.0.0.1:{free_port()}"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield grpc_port, "s3cret"
    finally:
        process.terminate()
        process.wait(10)


async def test_serve_answers_the_grpc_admin_api_with_the_token(served: tuple[int, str]) -> None:
    port, token = served
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        metadata = (("authorization", f"Bearer {token}"),)
        for _ in range(100):
            try:
                snapshot = await stub.GetSnapshot(pb.GetSnapshotRequest(), metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                await asyncio.sleep(0.1)
                continue
            if snapshot.version:
                break
            await asyncio.sleep(0.1)
        assert [t.type for t in snapshot.types] == ["CDS", "EDS", "LDS", "RDS"]
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await stub.ListStreams(pb.ListStreamsRequest())
        assert denied.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_off_loopback_without_a_token_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(grpc=f"0.0.0.0:{free_port()}"))
    env = {k: v for k, v in os.environ.items() if k != "XDS_CONTROL_ADMIN_TOKEN"}
    run = subprocess.run(
        serve_argv(config, admin=f"127.0.0.1:{free_port()}"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("xds-control serve:")]
    assert len(lines) == 1, run.stderr
    assert "XDS_CONTROL_ADMIN_TOKEN" in lines[0]
