"""The fleet ``fleet_streams`` serves, and one timed weight change to it."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import yaml

from xds_control.cache import MemorySnapshotCache
from xds_control.config import DEFAULT_GROUP, Config, parse_config
from xds_control.control import ReconcileInputs, reconcile_groups
from xds_control.discovery import Endpoint
from xds_control.xds import EndpointWeight
from xds_control.xds import type_urls as urls
from xds_lab.bench.fleet_report import FleetResult, process_cpu_s
from xds_lab.bench.push_cell import AckWaiter

__all__ = ["ACK_TIMEOUT_S", "Fleet", "fleet_config", "wait_for_acks"]

ACK_TIMEOUT_S = 60.0


def fleet_config(*, pools: int, endpoints: int, listener_port: int) -> Config:
    """``pools`` MAGLEV pools (the default policy) sharing ``endpoints`` valid loopback
    addresses (nothing listens: Envoy only needs IP:PORTs), one listener, a route per pool by
    model header."""
    per_pool = endpoints // pools
    data = {
        "pools": [
            {
                "name": f"pool-{p}",
                "endpoints": [
                    {"address": f"127.0.{1 + i // 250}.{1 + i % 250}:8000"}
                    for i in range(p * per_pool, (p + 1) * per_pool)
                ],
            }
            for p in range(pools)
        ],
        "listeners": [
            {
                "name": "gateway",
                "address": f"127.0.0.1:{listener_port}",
                "routes": [
                    {"name": f"model-{p}", "match": {"model": f"model-{p}"}, "pool": f"pool-{p}"}
                    for p in range(pools)
                ],
            }
        ],
    }
    return parse_config(text=yaml.safe_dump(data), source="bench")


@dataclass(kw_only=True)
class Fleet:
    """What one change needs: the config, the endpoints, the weights so far."""

    config: Config
    endpoints: dict[str, tuple[Endpoint, ...]]
    cache: MemorySnapshotCache
    waiter: AckWaiter
    nodes: list[str]
    rng: random.Random
    clients_pid: int = 0
    weights: dict[str, EndpointWeight] = field(default_factory=dict)

    async def change(self, result: FleetResult) -> None:
        """One endpoint of one pool gets a new weight; record its samples in ``result``."""
        pool = self.endpoints[self.rng.choice(sorted(self.endpoints))]
        endpoint = pool[self.rng.randrange(len(pool))]
        decided = self.weights.get(endpoint.address)
        current = endpoint.weight if decided is None else decided.weight
        new = self.rng.choice([w for w in range(1, 101) if w != current])
        self.weights[endpoint.address] = EndpointWeight(new)
        cpu0, t0 = time.process_time(), time.perf_counter()
        snapshot = reconcile_groups(
            ReconcileInputs(config=self.config, endpoints=self.endpoints, weights=self.weights)
        )[DEFAULT_GROUP]
        self.waiter.expect(version=snapshot.resource_set(urls.ENDPOINT).version, nodes=self.nodes)
        cpu1, t1 = time.process_time(), time.perf_counter()
        clients0 = process_cpu_s(self.clients_pid)
        self.cache.set_snapshot(DEFAULT_GROUP, snapshot)
        await wait_for_acks(self.waiter, ACK_TIMEOUT_S)
        cpu2 = time.process_time()
        result.clients_cpu_s.append(process_cpu_s(self.clients_pid) - clients0)
        result.build_s.append(t1 - t0)
        result.ack_s.append(self.waiter.finished_at - t1)
        result.first_ack_s.append(self.waiter.first_at - t1)
        result.cpu_s.append(cpu2 - cpu0)
        result.push_cpu_s.append(cpu2 - cpu1)


async def wait_for_acks(waiter: AckWaiter, timeout: float) -> None:
    try:
        await asyncio.wait_for(waiter.done.wait(), timeout)
    except TimeoutError:
        pending = waiter.pending()
        raise SystemExit(f"no ACK within {timeout} s from {len(pending)}: {pending[:5]}") from None
