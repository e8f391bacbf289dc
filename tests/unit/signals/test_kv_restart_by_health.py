"""A server whose health went down and up is taken as restarted: its KV blocks are cleared at
once, not at its next batch (the protocol has no heartbeat; a restarted server may stay idle)."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from configs import CHAT_AND_BATCH
from xds_control.config import Config
from xds_control.control.loop import kv_health
from xds_control.control.weigher import EngineWeights
from xds_control.discovery import Health
from xds_control.discovery.static import to_endpoints
from xds_control.signals.kv_events import KvEvents
from xds_control.signals.kv_wire import AllCleared, KvEvent
from xds_control.xds.endpoints import EndpointWeight

A, B = "127.0.0.1:8001", "127.0.0.1:8002"


class Recording:
    def __init__(self) -> None:
        self.cleared: list[str] = []

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        self.cleared += [server for e in events if isinstance(e, AllCleared)]


async def test_down_then_up_clears_that_server_once() -> None:
    config = Config.model_validate(
        yaml.safe_load(
            CHAT_AND_BATCH.replace("  - name: chat\n", "  - name: chat\n    kv_events: {}\n")
        )
    )
    sink = Recording()
    kv = KvEvents(sink=sink)
    pool = next(p for p in config.pools if p.name == "chat")
    kv.sync(config, {"chat": to_endpoints(pool.endpoints)})
    try:
        kv.observe_health({A: True, B: True})
        kv.observe_health({A: False, B: True})
        assert sink.cleared == []  # down is not yet a restart: it may come back as it was
        kv.observe_health({B: True})  # A not read this cycle: it keeps its last
        kv.observe_health({A: True, B: True})
        assert sink.cleared == [A]
        kv.observe_health({A: True, B: True})
        assert sink.cleared == [A]  # once per bounce
        found = kv.subscription(A)
        assert found is not None
        assert found[1].restarts == 1
        assert found[1].last_seq == -1  # its numbers start again
    finally:
        await kv.close()


def test_the_loop_passes_healthy_and_unhealthy_servers_and_leaves_draining_ones_out() -> None:
    weights = EngineWeights(
        endpoints={
            A: EndpointWeight(weight=10, health=Health.HEALTHY),
            B: EndpointWeight(weight=1, health=Health.UNHEALTHY),
            "127.0.0.1:8003": EndpointWeight(weight=1, health=Health.DRAINING),
        }
    )
    assert kv_health(weights) == {A: True, B: False}
