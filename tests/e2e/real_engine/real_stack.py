"""A stack over the run's real vLLM servers: ``xds-control serve`` and a real Envoy in front of
the lent fleet, the pool's picker reading the servers' KV events with the model's own
tokenizer, and the engine weighing them from their ``vllm:*`` metrics (direct scrape)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.real_engine.server import LentFleet, VllmFleet

RealStack = Stack[LentFleet]


def real_config(
    stack: RealStack,
    *,
    pool: Mapping[str, Any] | None = None,
    route: Mapping[str, Any] | None = None,
    picker: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One vLLM pool over the fleet with its KV events subscribed; ``picker`` adds picker
    settings (the picker with the model's tokenizer is always on), ``pool`` and ``route``
    fields."""
    servers = stack.backends.servers
    model = next(iter(servers.values())).install.model
    endpoints = [
        {"address": s.address, "kv_events": {"port": s.kv_port, "replay_port": s.replay_port}}
        for s in servers.values()
    ]
    return one_pool_config(
        endpoints=endpoints,
        listener_port=stack.listener_port,
        pool={
            "engine": "vllm",
            "picker": {
                "address": f"127.0.0.1:{free_port()}",
                "tokenizer": str(model),
                # Not the 50 ms default: on two cores shared with the rest of the suite, and
                # niced, the picker can miss it, and Envoy then fails open past what the test
                # reads (the pick, the response body's usage).
                "message_timeout_ms": 2000,
                **(picker or {}),
            },
            "kv_events": {"topic": "kv-events"},
            **(pool or {}),
        },
        route=route,
        signals={"scrape": {"enabled": True, "interval_s": 0.5}},
    )


@contextlib.asynccontextmanager
async def real_stack(
    fleet: VllmFleet,
    workdir: Path,
    *,
    pool: Mapping[str, Any] | None = None,
    route: Mapping[str, Any] | None = None,
    picker: Mapping[str, Any] | None = None,
) -> AsyncIterator[RealStack]:
    """The stack started (its control plane logging each pick, at debug), closed on exit; the
    fleet goes on."""
    stack: RealStack = Stack(workdir=workdir, backends=fleet.lend(), log_level="debug")
    try:
        await stack.start(real_config(stack, pool=pool, route=route, picker=picker))
        yield stack
    finally:
        await stack.close()


def picks(stack: RealStack) -> list[dict[str, Any]]:
    """The control plane's ``pick`` log records, oldest first: each has ``cached`` (address ->
    the prompt tokens the picker believes that server holds), ``chosen`` and ``tokens``."""
    out = []
    text = stack.control_plane.process.log_path.read_text(errors="replace")
    for line in text.splitlines():
        if '"pick"' not in line:
            continue
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if record.get("event") == "pick":
                out.append(record)
    return out


async def events_settled(stack: RealStack, *, quiet_s: float = 0.3, timeout: float = 10.0) -> None:
    """Until no server's KV-event count has moved for ``quiet_s``: what the servers published
    is in the picker's index."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    before = None
    while loop.time() < deadline:
        status = await stack.control_plane.get_json("/v1/status")
        now = {r["server"]: r["events"] for r in status.get("kv_events", [])}
        if now and now == before:
            return
        before = now
        await asyncio.sleep(quiet_s)
    raise AssertionError(f"KV events still moving after {timeout} s: {before}")
