"""A fleet's worth of ADS streams: does one weight change still reach everyone fast, what does
a push cost the control plane, and does its memory stay flat?

The xDS server runs in this process (as in push_latency), so its CPU time and RSS are this
process's. ``--streams`` light clients (``ads_clients``: SotW, ACK at once, as Envoy does) run
in a process of their own, beside ``--envoys`` real Envoys. The config has ``--pools`` pools
sharing ``--endpoints`` endpoints behind one listener with a route per pool. A change gives one
endpoint of one pool (seeded random) a new weight; it is timed from ``set_snapshot`` to the
last stream's ACK of the new EDS version. After ``--changes`` changes one after another comes
a soak of one change per second for ``--soak-s`` seconds, sampling RSS.

    python -m xds_lab.bench.fleet_streams --streams 1000 --envoys 10 --soak-s 600
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from xds_control.cache import MemorySnapshotCache
from xds_control.config import DEFAULT_GROUP, Config, parse_config
from xds_control.control import EndpointWeight, reconcile_groups
from xds_control.discovery import Endpoint, to_endpoints
from xds_control.log import configure_logging
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls
from xds_control.xds.routes import route_config_name
from xds_lab.bench.push_cell import AckWaiter
from xds_lab.bench.tables import machine_info, markdown_table
from xds_lab.harness.envoy import EnvoyProcess, find_envoy
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess
from xds_lab.loadgen import percentile

__all__ = ["FleetResult", "fleet_config", "main"]

SYNC_TIMEOUT_S = 300.0
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


def rss_mb() -> float:
    """This process's resident set, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class FleetResult:
    """Samples in seconds; RSS in MB."""

    streams: int
    envoys: int
    endpoints: int
    pools: int
    sync_s: float = 0.0
    ack_s: list[float] = field(default_factory=list)
    first_ack_s: list[float] = field(default_factory=list)
    build_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    """Process CPU (all threads) from before the build to the last ACK."""
    push_cpu_s: list[float] = field(default_factory=list)
    """Process CPU from ``set_snapshot`` to the last ACK: the push alone."""
    timed_changes: int = 0
    """The first ``timed_changes`` samples are back to back; the rest are the soak's."""
    soak_s: float = 0.0
    rss_synced_mb: float = 0.0
    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    """(seconds into the soak, RSS MB)."""


@dataclass(kw_only=True)
class _Fleet:
    """What one change needs: the config, the endpoints, the weights so far."""

    config: Config
    endpoints: dict[str, tuple[Endpoint, ...]]
    cache: MemorySnapshotCache
    waiter: AckWaiter
    nodes: list[str]
    rng: random.Random
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
            config=self.config, endpoints=self.endpoints, weights=self.weights
        )[DEFAULT_GROUP]
        self.waiter.expect(version=snapshot.resource_set(urls.ENDPOINT).version, nodes=self.nodes)
        cpu1, t1 = time.process_time(), time.perf_counter()
        self.cache.set_snapshot(DEFAULT_GROUP, snapshot)
        await _wait(self.waiter, ACK_TIMEOUT_S)
        cpu2 = time.process_time()
        result.build_s.append(t1 - t0)
        result.ack_s.append(self.waiter.finished_at - t1)
        result.first_ack_s.append(self.waiter.first_at - t1)
        result.cpu_s.append(cpu2 - cpu0)
        result.push_cpu_s.append(cpu2 - cpu1)


async def _wait(waiter: AckWaiter, timeout: float) -> None:
    try:
        await asyncio.wait_for(waiter.done.wait(), timeout)
    except TimeoutError:
        pending = waiter.pending()
        raise SystemExit(f"no ACK within {timeout} s from {len(pending)}: {pending[:5]}") from None


def _clients(
    args: argparse.Namespace, *, port: int, routes: list[str], workdir: Path
) -> ManagedProcess:
    return ManagedProcess(
        name="ads-clients",
        argv=[
            sys.executable,
            "-m",
            "xds_lab.bench.ads_clients",
            f"127.0.0.1:{port}",
            "--streams",
            str(args.streams),
            "--per-connection",
            str(args.per_connection),
            "--routes",
            *routes,
        ],
        log_path=workdir / "ads-clients.log",
    )


async def _soak(fleet: _Fleet, result: FleetResult, seconds: float) -> None:
    started = time.monotonic()
    next_sample = 0.0
    while (elapsed := time.monotonic() - started) < seconds:
        tick = time.monotonic()
        await fleet.change(result)
        if elapsed >= next_sample:
            result.rss_samples.append((elapsed, rss_mb()))
            next_sample += 10.0
        await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    gc.collect()
    result.rss_samples.append((time.monotonic() - started, rss_mb()))
    result.soak_s = time.monotonic() - started


async def run(args: argparse.Namespace, workdir: Path) -> FleetResult:
    """Sync the fleet, time ``args.changes`` changes, then soak."""
    config = fleet_config(pools=args.pools, endpoints=args.endpoints, listener_port=free_port())
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}
    cache, registry, waiter = MemorySnapshotCache(), StreamRegistry(), AckWaiter()
    registry.add_ack_listener(waiter.on_ack)
    initial = reconcile_groups(config=config, endpoints=endpoints, weights={})[DEFAULT_GROUP]
    cache.set_snapshot(DEFAULT_GROUP, initial)
    server = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    await server.start()
    await server.mark_serving()
    routes = [route_config_name(listener) for listener in config.listeners]
    clients = _clients(args, port=server.port, routes=routes, workdir=workdir)
    envoys = [
        EnvoyProcess(workdir=workdir, xds_port=server.port, node_id=f"envoy-{i}")
        for i in range(args.envoys)
    ]
    nodes = [f"client-{i}" for i in range(args.streams)] + [e.node_id for e in envoys]
    result = FleetResult(
        streams=args.streams, envoys=args.envoys, endpoints=args.endpoints, pools=args.pools
    )
    fleet = _Fleet(
        config=config,
        endpoints=endpoints,
        cache=cache,
        waiter=waiter,
        nodes=nodes,
        rng=random.Random(args.seed),
    )
    waiter.expect(version=initial.resource_set(urls.ENDPOINT).version, nodes=nodes)
    started = time.perf_counter()
    try:
        await clients.start()
        await asyncio.gather(*(envoy.start() for envoy in envoys))
        await _wait(waiter, SYNC_TIMEOUT_S)
        result.sync_s = time.perf_counter() - started
        print(f"  synced {len(nodes)} streams in {result.sync_s:.1f} s", flush=True)
        gc.collect()
        result.rss_synced_mb = rss_mb()
        if args.gc_freeze:
            gc.freeze()  # what is alive now (snapshot, stream state) is left out of collections
        for _ in range(args.changes):
            await fleet.change(result)
            await asyncio.sleep(0.2)
        result.timed_changes = len(result.ack_s)
        print(f"  {args.changes} changes done; soaking for {args.soak_s:.0f} s", flush=True)
        await _soak(fleet, result, args.soak_s)
    finally:
        await asyncio.gather(*(envoy.stop() for envoy in envoys))
        await clients.stop()
        await server.stop(0)
    return result


def _ms(samples: Sequence[float], q: float) -> str:
    return f"{percentile(samples, q) * 1000:.1f}"


def results_table(r: FleetResult) -> str:
    """Markdown: latency and CPU per change, back to back and during the soak."""
    header = ["Phase", "Changes", "last ACK p50 ms", "last ACK p99 ms", "max ms"]
    header += ["first ACK p50 ms", "build p50 ms", "CPU s/push p50", "push-only CPU s p50"]
    rows = []
    phases = (
        ("back to back", slice(0, r.timed_changes)),
        ("soak, 1/s", slice(r.timed_changes, None)),
    )
    for name, part in phases:
        acks = r.ack_s[part]
        if not acks:
            continue
        rows.append(
            [
                name,
                len(acks),
                _ms(acks, 50),
                _ms(acks, 99),
                f"{max(acks) * 1000:.1f}",
                _ms(r.first_ack_s[part], 50),
                _ms(r.build_s[part], 50),
                f"{percentile(r.cpu_s[part], 50):.3f}",
                f"{percentile(r.push_cpu_s[part], 50):.3f}",
            ]
        )
    return markdown_table(header=header, rows=rows)


def memory_lines(r: FleetResult) -> list[str]:
    """RSS at steady state and through the soak."""
    samples = r.rss_samples
    lines = [f"- RSS right after the first sync: {r.rss_synced_mb:.0f} MB"]
    if samples:
        first, last = samples[0][1], samples[-1][1]
        peak = max(mb for _, mb in samples)
        lines.append(
            f"- RSS over a {r.soak_s / 60:.1f} min soak: {first:.0f} MB at its start, "
            f"{last:.0f} MB at its end, {peak:.0f} MB at most "
            f"({len(samples)} samples, every 10 s)"
        )
    return lines


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m xds_lab.bench.fleet_streams", description=__doc__
    )
    parser.add_argument("--streams", type=int, default=1000, help="light ADS clients")
    parser.add_argument(
        "--per-connection", type=int, default=10, help="streams per HTTP/2 connection"
    )
    parser.add_argument("--envoys", type=int, default=10, help="real Envoys beside them")
    parser.add_argument("--endpoints", type=int, default=10_000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--changes", type=int, default=30, help="changes back to back")
    parser.add_argument(
        "--soak-s", type=float, default=120.0, help="seconds of one change per second"
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after the first sync: how much the garbage collector costs a push",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run once, print the tables and the machine."""
    args = _parse_args(argv)
    configure_logging(level="warning")
    machine = machine_info(envoy_bin=find_envoy())
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    print()
    print(
        f"{result.streams} ADS streams + {result.envoys} Envoys, {result.endpoints} endpoints "
        f"in {result.pools} pools; first sync {result.sync_s:.1f} s"
    )
    print()
    print(results_table(result))
    print()
    print("\n".join(memory_lines(result)))
    print()
    print("\n".join(f"- {key}: {value}" for key, value in machine.items()))


if __name__ == "__main__":
    main()
