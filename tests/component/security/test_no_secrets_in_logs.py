"""What an operator's log collector receives never holds a secret: not the admin bearer token
(right or wrong), not the xDS server's private key, whatever the admin API was asked."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path

import aiohttp

from e2e.tls_ca import TestCa
from xds_lab.harness.ports import free_port

CONFIG = """\
admin_token_file: {token_file}
tls: {{cert_file: {cert}, key_file: {key}, client_ca_file: {ca}, verify_node_id: true}}
pools:
  - name: chat
    endpoints: [{{address: 127.0.0.1:8001}}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{{name: all, pool: chat}}]
"""


async def _exercise_admin(url: str, *, token: str, wrong: str) -> list[int]:
    statuses = []
    async with aiohttp.ClientSession() as session:
        for headers in (
            {},
            {"Authorization": f"Bearer {wrong}"},
            {"Authorization": f"Bearer {token}"},
        ):
            for path in ("/v1/status", "/v1/weights?explain=1", "/v1/streams"):
                async with session.get(url + path, headers=headers) as response:
                    statuses.append(response.status)
    return statuses


async def test_tokens_and_keys_never_reach_the_log(tmp_path: Path) -> None:
    ca = TestCa(tmp_path / "ca")
    server = ca.issue("xds", ips=("127.0.0.1",), server=True)
    token, wrong = f"tok-{secrets.token_hex(16)}", f"bad-{secrets.token_hex(16)}"
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        CONFIG.format(
            token_file=token_file, cert=server.cert_file, key=server.key_file, ca=ca.ca_file
        )
    )
    admin_port = free_port()
    log = tmp_path / "serve.log"
    argv = [
        sys.executable, "-m", "xds_control", "--log-level", "debug", "--log-format", "json",
        "serve", "--config", str(config),
        "--xds-address", f"127.0.0.1:{free_port()}", "--admin-address", f"0.0.0.0:{admin_port}",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=out, env=dict(os.environ)
        )
        try:
            url = f"http://127.0.0.1:{admin_port}"
            for _ in range(100):  # until it listens
                try:
                    statuses = await _exercise_admin(url, token=token, wrong=wrong)
                    break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError(log.read_text())
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), 10)
    # Off loopback the token is required: refused without it or with a wrong one.
    assert statuses[:6] == [401] * 6, statuses
    assert all(status == 200 for status in statuses[6:]), statuses
    text = log.read_text()
    assert "serving" in text  # the log is there, at debug level
    assert token not in text
    assert wrong not in text
    key_lines = [line for line in server.key_file.read_text().splitlines() if "-----" not in line]
    assert key_lines
    assert not any(line in text for line in key_lines)
