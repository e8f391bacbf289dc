"""A running `xds-control serve` whose config file gets bytes that are not UTF-8: the error
shows in /v1/status, the last good snapshot stays, and a later valid edit is applied."""

from __future__ import annotations

from pathlib import Path

import yaml

from e2e.stack import echo_stack, eventually, weighted_config


def read(path: Path) -> str:
    return path.read_text()


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


async def test_non_utf8_config_is_reported_and_a_later_edit_still_applies(tmp_path: Path) -> None:
    stack = echo_stack(tmp_path)
    try:
        await stack.start(weighted_config(stack, [10, 30]), envoys=0)
        cp = stack.control_plane
        status = await cp.get_json("/v1/status")
        version = status["version"]
        served = await cp.get_json("/v1/endpoints")

        good = yaml.safe_dump(weighted_config(stack, [10, 30])).encode()
        write_atomically(cp.config_path, good.replace(b"gateway", b"gat\xe9way"))  # Latin-1

        async def rejected() -> bool:
            return bool((await cp.get_json("/v1/status"))["config_error"])

        await eventually(rejected, what="the undecodable config to be reported")
        status = await cp.get_json("/v1/status")
        assert "not UTF-8 at byte" in status["config_error"], status
        assert status["version"] == version
        assert await cp.get_json("/v1/endpoints") == served

        stack.write_config(weighted_config(stack, [20, 30]))

        async def applied() -> bool:
            now = await cp.get_json("/v1/status")
            return now["version"] != version and now["config_error"] is None

        await eventually(applied, what="the valid edit to be served")
        weights = sorted(row["weight"] for row in (await cp.get_json("/v1/endpoints"))["chat"])
        assert weights == [20, 30]
        assert (await cp.get_json("/v1/status"))["errors"] == {}
        assert "background task crashed" not in read(cp.process.log_path)
    finally:
        await stack.close()
