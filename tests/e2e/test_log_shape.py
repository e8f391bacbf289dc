"""The control plane's JSON logs: one object per line, and the lines an operator greps for
carry the context that answers "which Envoy, which type, which version, which pool"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from e2e.stack import EchoStack, eventually, weighted_config
from xds_control.xds import type_urls as urls
from xds_lab.harness.backends import EchoBackends
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack

OVERSIZED = "(tenant|team|org)-[a-z0-9]{1,40}-(prod|staging|dev){1,3}"
"""Valid RE2 whose compiled program is over Envoy's default limit: Envoy NACKs the routes."""


def _lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)  # every line is one JSON object
            assert isinstance(record, dict), line
            records.append(record)
    return records


def _events(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == event]


async def test_json_log_lines_carry_node_type_version_and_pool(tmp_path: Path) -> None:
    echo = EchoBackends(ports=[free_port(), free_port()])
    stack: EchoStack = Stack(workdir=tmp_path, backends=echo, log_level="debug")
    try:
        await stack.start(weighted_config(stack, [10, 10]))
        routes = weighted_config(
            stack, [10, 10], match={"headers": [{"name": "x-tenant", "regex": OVERSIZED}]}
        )
        stack.write_config(routes)

        async def nacked() -> bool:
            return "envoy rejected a response" in stack.control_plane.process.tail(200)

        await eventually(nacked, what="Envoy to NACK the route table")
        bad = weighted_config(stack, [0, 10])
        stack.write_config(bad)

        async def rejected() -> bool:
            return bool((await stack.control_plane.get_json("/v1/status"))["config_error"])

        await eventually(rejected, what="the invalid edit to be rejected")
    finally:
        await stack.close()

    records = _lines(stack.control_plane.process.log_path)
    assert records, "no log lines"
    for record in records:
        assert {"event", "level", "timestamp"} <= record.keys(), record

    connected = _events(records, "envoy connected")
    assert connected
    assert all(r["node_id"] == "envoy-0" for r in connected), connected

    responses = _events(records, "response")
    assert {r["type_url"] for r in responses} == set(urls.ORDER)
    for response in responses:
        assert response["node_id"] == "envoy-0"
        assert response["version"]

    (nack,) = _events(records, "envoy rejected a response")
    assert nack["node_id"] == "envoy-0"
    assert nack["type_url"] == urls.ROUTE
    assert nack["rejected_version"]
    assert nack["kept_version"]
    assert "max program size" in nack["error"]

    (refused,) = _events(records, "config rejected; serving the last good one")
    assert any("pools[0].endpoints[0].weight" in p for p in refused["problems"]), refused

    published = _events(records, "snapshot published")
    assert published
    assert all(r["group"] and r["version"] for r in published), published
