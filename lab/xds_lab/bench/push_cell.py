"""One push-latency cell: an in-process xDS server, ``envoys`` real Envoys, ``endpoints``
endpoints, and weight changes made one at a time, each timed from ``set_snapshot`` to the last
Envoy's ACK (heard through ``StreamRegistry``'s ACK listener, so nothing polls)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.config import Config, parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import Endpoint, to_endpoints
from xds_control.server import StreamRegistry, TypeState, XdsServer, XdsStream
from xds_control.xds import EndpointWeight
from xds_control.xds import type_urls as urls
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.errors import HarnessError
from xds_lab.harness.pool_config import POOL
from xds_lab.harness.ports import free_port

__all__ = ["AckWaiter", "CellResult", "bench_config", "measure_push_latency"]

ACK_TIMEOUT_S = 15.0
SPACING_S = 0.02
"""Pause between changes, so one change's ACKs never overlap the next change's push."""
CHECKED_ENDPOINTS = 3
"""How many of the last changed endpoints are read back from each Envoy's ``/clusters``."""


@dataclass(frozen=True)
class CellResult:
    """One (envoys, endpoints) cell: a sample per change, in seconds."""

    envoys: int
    endpoints: int
    ack_s: tuple[float, ...]
    """set_snapshot -> the last Envoy's ACK of the new EDS version."""
    first_ack_s: tuple[float, ...]
    """set_snapshot -> the first Envoy's ACK (with many Envoys: how far the fleet spreads)."""
    build_s: tuple[float, ...]
    """reconcile_once: build and serialise the snapshot."""
    final_weights: dict[str, int]
    """The last weight set for each of the last few changed endpoints."""
    envoy_weights: dict[str, dict[str, int]]
    """Node id -> what its ``/clusters`` showed for those endpoints after the last change."""

    @property
    def applied(self) -> bool:
        """Every Envoy runs the final weights (not only ACKed them)."""
        return all(seen == self.final_weights for seen in self.envoy_weights.values())


class AckWaiter:
    """Waits for every node to ACK one EDS version; stamps the moment the last ACK arrived."""

    def __init__(self) -> None:
        self._version = ""
        self._pending: set[str] = set()
        self.done = asyncio.Event()
        self.first_at = 0.0
        self.finished_at = 0.0

    def expect(self, *, version: str, nodes: Iterable[str]) -> None:
        """Start waiting for ``version`` from ``nodes``."""
        self._version = version
        self._pending = set(nodes)
        self.first_at = 0.0
        self.finished_at = 0.0
        self.done = asyncio.Event()

    def pending(self) -> list[str]:
        """Nodes that have not ACKed yet."""
        return sorted(self._pending)

    def on_ack(self, stream: XdsStream, state: TypeState) -> None:
        """ACK listener: runs inside the stream's read loop, so the stamp is the arrival."""
        if state.type_url != urls.ENDPOINT or state.acked_version != self._version:
            return
        if stream.node is None or stream.node.id not in self._pending:
            return
        self._pending.discard(stream.node.id)
        if not self.first_at:
            self.first_at = time.perf_counter()
        if not self._pending and not self.done.is_set():
            self.finished_at = time.perf_counter()
            self.done.set()

    async def wait(self, what: str) -> None:
        """Until every node ACKed; ``HarnessError`` naming the laggards after the timeout."""
        try:
            await asyncio.wait_for(self.done.wait(), ACK_TIMEOUT_S)
        except TimeoutError:
            raise HarnessError(f"no ACK of {what} from {self.pending()}") from None


def bench_config(*, endpoints: int, listener_port: int, lb: str = "maglev") -> Config:
    """One pool (``lb`` policy) of ``endpoints`` unreachable-but-valid loopback addresses, one
    route."""
    # 127.0.1.1 ... 127.0.4.250, each with its own port: Envoy only needs valid IP:PORTs.
    addresses = [f"127.0.{1 + i // 250}.{1 + i % 250}:{20000 + i}" for i in range(endpoints)]
    data = {
        "pools": [
            {
                "name": POOL,
                "lb": {"policy": lb},
                "endpoints": [{"address": a, "weight": 10} for a in addresses],
            }
        ],
        "listeners": [
            {
                "name": "gateway",
                "address": f"127.0.0.1:{listener_port}",
                "routes": [{"name": "all", "pool": POOL}],
            }
        ],
    }
    return parse_config(text=yaml.safe_dump(data), source="bench")


async def _read_weights(
    envoys: Sequence[EnvoyProcess], addresses: Iterable[str]
) -> dict[str, dict[str, int]]:
    wanted = set(addresses)
    out = {}
    for envoy in envoys:
        hosts = await envoy.cluster_hosts(POOL)
        out[envoy.node_id] = {h.address: h.weight for h in hosts if h.address in wanted}
    return out


@dataclass
class _Run:
    """What one cell's changes produced, filled in change by change."""

    ack_s: list[float] = field(default_factory=list)
    first_ack_s: list[float] = field(default_factory=list)
    build_s: list[float] = field(default_factory=list)
    weights: dict[str, EndpointWeight] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)


async def _change_weights(
    *,
    config: Config,
    endpoints: Mapping[str, tuple[Endpoint, ...]],
    cache: MemorySnapshotCache,
    waiter: AckWaiter,
    nodes: Sequence[str],
    changes: int,
) -> _Run:
    rng = random.Random(changes)  # seeded: the same run changes the same endpoints
    pool = endpoints[POOL]
    run = _Run()
    for index in range(changes):
        endpoint = pool[rng.randrange(len(pool))]
        decided = run.weights.get(endpoint.address)
        current = endpoint.weight if decided is None else decided.weight
        new = rng.choice([w for w in range(1, 101) if w != current])
        run.weights[endpoint.address] = EndpointWeight(new)
        run.changed.append(endpoint.address)
        started = time.perf_counter()
        snapshot = reconcile_once(
            ReconcileInputs(config=config, endpoints=endpoints, weights=run.weights)
        )
        built = time.perf_counter()
        waiter.expect(version=snapshot.resource_set(urls.ENDPOINT).version, nodes=nodes)
        t0 = time.perf_counter()
        cache.set_snapshot(DEFAULT_GROUP, snapshot)
        await waiter.wait(f"change {index}")
        run.ack_s.append(waiter.finished_at - t0)
        run.first_ack_s.append(waiter.first_at - t0)
        run.build_s.append(built - started)
        await asyncio.sleep(SPACING_S)
    return run


async def measure_push_latency(
    *, envoys: int, endpoints: int, changes: int, workdir: Path, lb: str = "maglev"
) -> CellResult:
    """Start the server and ``envoys`` Envoys, sync them, make ``changes`` weight changes one
    at a time, and read the last weights back from every Envoy's ``/clusters``."""
    config = bench_config(endpoints=endpoints, listener_port=free_port(), lb=lb)
    by_pool = {POOL: to_endpoints(config.pool(POOL).endpoints)}
    cache, registry, waiter = MemorySnapshotCache(), StreamRegistry(), AckWaiter()
    registry.add_ack_listener(waiter.on_ack)
    initial = reconcile_once(ReconcileInputs(config=config, endpoints=by_pool))
    cache.set_snapshot(DEFAULT_GROUP, initial)
    server = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    fleet = [
        EnvoyProcess(workdir=workdir, xds_port=server.port, node_id=f"envoy-{i}")
        for i in range(envoys)
    ]
    nodes = [envoy.node_id for envoy in fleet]
    waiter.expect(version=initial.resource_set(urls.ENDPOINT).version, nodes=nodes)
    await server.start()
    await server.mark_serving()
    try:
        await asyncio.gather(*(envoy.start() for envoy in fleet))
        await asyncio.gather(*(envoy.wait_live() for envoy in fleet))
        await waiter.wait("the initial EDS")
        run = await _change_weights(
            config=config,
            endpoints=by_pool,
            cache=cache,
            waiter=waiter,
            nodes=nodes,
            changes=changes,
        )
        checked = list(dict.fromkeys(reversed(run.changed)))[:CHECKED_ENDPOINTS]
        seen = await _read_weights(fleet, checked)
    finally:
        await asyncio.gather(*(envoy.stop() for envoy in fleet))
        await server.stop(0)
    return CellResult(
        envoys=envoys,
        endpoints=endpoints,
        ack_s=tuple(run.ack_s),
        first_ack_s=tuple(run.first_ack_s),
        build_s=tuple(run.build_s),
        final_weights={address: run.weights[address].weight for address in checked},
        envoy_weights=seen,
    )
