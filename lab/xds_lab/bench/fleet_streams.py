"""A fleet's worth of ADS streams: does one weight change still reach everyone fast, what does
a push cost the control plane, and does its memory stay flat?

The xDS server runs in this process (as in push_latency), so its CPU time and RSS are this
process's. ``--streams`` light clients (``ads_clients``: ``--ads`` state of the world or
delta, ACK at once, as Envoy does) run in a process of their own, beside ``--envoys`` real
Envoys speaking the same. The config has ``--pools`` pools sharing ``--endpoints`` endpoints
behind one listener with a route per pool. A change gives one
endpoint of one pool (seeded random) a new weight; it is timed from ``set_snapshot`` to the
last stream's ACK of the new EDS version. After ``--changes`` changes one after another comes
a soak of one change per second for ``--soak-s`` seconds, sampling RSS.

    python -m xds_lab.bench.fleet_streams --streams 1000 --envoys 10 --soak-s 600 [--ads delta]
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
from dataclasses import asdict
from pathlib import Path

from xds_control.cache import MemorySnapshotCache
from xds_control.cli.collector import settle_for_serving
from xds_control.config import DEFAULT_GROUP
from xds_control.control import ReconcileInputs, reconcile_groups
from xds_control.discovery import to_endpoints
from xds_control.server import StreamRegistry, XdsServer
from xds_control.xds import type_urls as urls
from xds_control.xds.routes import route_config_name
from xds_lab.bench import entry
from xds_lab.bench.fleet_change import Fleet, fleet_config, wait_for_acks
from xds_lab.bench.fleet_report import (
    FleetResult,
    memory_lines,
    results_table,
    rss_mb,
    rss_table,
)
from xds_lab.bench.push_cell import AckWaiter
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess

__all__ = ["main", "measure"]

SYNC_TIMEOUT_S = 300.0


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
            "--ads",
            args.ads,
            "--routes",
            *routes,
        ],
        log_path=workdir / "ads-clients.log",
    )


async def _soak(fleet: Fleet, result: FleetResult, seconds: float) -> None:
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


async def measure(args: argparse.Namespace, workdir: Path) -> FleetResult:
    """Sync the fleet, time ``args.changes`` changes, then soak."""
    config = fleet_config(pools=args.pools, endpoints=args.endpoints, listener_port=free_port())
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}
    cache, registry, waiter = MemorySnapshotCache(), StreamRegistry(), AckWaiter()
    registry.add_ack_listener(waiter.on_ack)
    initial = reconcile_groups(ReconcileInputs(config=config, endpoints=endpoints))[DEFAULT_GROUP]
    cache.set_snapshot(DEFAULT_GROUP, initial)
    server = XdsServer(cache=cache, registry=registry, address="127.0.0.1:0")
    await server.start()
    await server.mark_serving()
    if not args.gc_default:  # as ``xds-control serve`` does once it serves
        settle_for_serving()
    routes = [route_config_name(listener) for listener in config.listeners]
    clients = _clients(args, port=server.port, routes=routes, workdir=workdir)
    envoys = [
        EnvoyProcess(workdir=workdir, xds_port=server.port, node_id=f"envoy-{i}", ads=args.ads)
        for i in range(args.envoys)
    ]
    nodes = [f"client-{i}" for i in range(args.streams)] + [e.node_id for e in envoys]
    result = FleetResult(
        ads=args.ads,
        streams=args.streams,
        envoys=args.envoys,
        endpoints=args.endpoints,
        pools=args.pools,
    )
    fleet = Fleet(
        config=config,
        endpoints=endpoints,
        cache=cache,
        waiter=waiter,
        nodes=nodes,
        rng=random.Random(args.seed),
    )
    waiter.expect(version=initial.resource_set(urls.ENDPOINT).version, nodes=nodes)
    result.rss_started_mb = rss_mb()
    started = time.perf_counter()
    try:
        await clients.start()
        fleet.clients_pid = clients.proc.pid if clients.proc is not None else 0
        await asyncio.gather(*(envoy.start() for envoy in envoys))
        await wait_for_acks(waiter, SYNC_TIMEOUT_S)
        result.sync_s = time.perf_counter() - started
        print(f"  synced {len(nodes)} streams in {result.sync_s:.1f} s", flush=True)
        gc.collect()
        result.rss_sync_peak_mb = rss_mb("VmHWM")
        result.rss_synced_mb = rss_mb()
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


def _parser() -> argparse.ArgumentParser:
    parser = entry.parser("fleet_streams", __doc__)
    parser.add_argument(
        "--ads",
        choices=("sotw", "delta"),
        default="sotw",
        help="the protocol every stream speaks, the Envoys' included",
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
        "--gc-default",
        action="store_true",
        help="keep CPython's collector as it is (serve freezes what start-up made and "
        "collects young objects less often): what the collector costs a push",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run once, print the tables and the machine."""
    run = entry.start(_parser(), argv)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        result = asyncio.run(measure(run.args, Path(tmp)))
    body = [
        f"{result.streams} {result.ads} ADS streams + {result.envoys} Envoys, "
        f"{result.endpoints} endpoints in {result.pools} pools; first sync {result.sync_s:.1f} s",
        "",
        results_table(result),
        "",
        *memory_lines(result),
    ]
    if len(result.rss_samples) > 2:
        body += ["", rss_table(result)]
    run.finish(title="ADS fleet streams: measured", body=body, summary={"result": asdict(result)})


if __name__ == "__main__":
    main()
