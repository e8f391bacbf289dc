"""Everything the golden record touches of the product's API, in one place.

``test_golden.py`` compares what ``record`` computes with ``golden.json``. An engineer who
renames or moves an API called here adapts this file only, never the JSON (nor ``inputs.py``,
which is plain data): the record is the contract that the weights, the snapshots and the
picker's choices stay bit for bit what they were when it was recorded.

Three runs over ``inputs.py``'s fixed, seeded inputs; every clock is one the run advances, so
nothing depends on the wall clock, the hash seed or the order tests run in:

- ``weights_run``: the weigher as the control loop drives it each cycle (scrape every
  endpoint's /metrics, fetch, decide);
- ``snapshots_run``: ``reconcile_groups`` on fixed configs with the engine's weights of a few
  cycles and the limits' budgets;
- ``picks_run``: the picker over a fixed fleet, with an index that vLLM's KV events feed, for
  a seeded sequence of requests.

Record anew (only for a deliberate change of behaviour): ``PYTHONPATH=tests python -m
golden.harness``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import aiohttp

from decisions import steady_decision
from golden import inputs
from xds_control.config import Config, DataPathConfig, parse_config
from xds_control.control import ReconcileInputs, reconcile_groups
from xds_control.control.weigher import EngineWeights, Weigher, targets_of
from xds_control.discovery import Endpoint, Health, to_endpoints
from xds_control.engine import Factors, WeightDecision
from xds_control.errors import SignalError
from xds_control.limits import Buckets, Latency, Limiter
from xds_control.picker import Fleet, Picker
from xds_control.picker.cached_blocks import CachedBlocks
from xds_control.picker.prefix import TokenIds, Wanted
from xds_control.signals import (
    DataPath,
    DataPathSource,
    Observation,
    Sample,
    ScrapeSource,
    Signal,
    Target,
)
from xds_control.signals.kv_wire import BlocksRemoved, BlocksStored, KvEvent
from xds_control.xds import Snapshot

__all__ = ["GOLDEN", "dumps", "picks_run", "record", "snapshots_run", "weights_run"]

GOLDEN = Path(__file__).with_name("golden.json")


# ---------------------------------------------------------------------------------- weights


class _Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self._body = body

    async def read(self) -> bytes:
        return self._body

    def get_encoding(self) -> str:
        return "utf-8"


class _Client:
    """An ``aiohttp.ClientSession`` stand-in: each server's /metrics from its counters."""

    def __init__(
        self, servers: Mapping[str, inputs.Server], failing: Callable[[str], bool]
    ) -> None:
        self._servers = servers
        self._failing = failing

    @asynccontextmanager
    async def request(self, method: str, url: str, data: Any = None) -> AsyncIterator[_Response]:
        address = url.removeprefix("http://").removesuffix("/metrics")
        if self._failing(address):
            yield _Response(503, b"unavailable")
        else:
            yield _Response(200, self._servers[address].exposition().encode())


class _Prometheus:
    """A ``SignalSource`` reading the batch pool's servers; down from ``OUTAGE_AT`` on."""

    def __init__(self, servers: Mapping[str, inputs.Server], clock: Callable[[], float]) -> None:
        self._servers = servers
        self._clock = clock
        self.cycle = 0

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        if self.cycle >= inputs.OUTAGE_AT:
            raise SignalError("prometheus is down")
        found = [(t.address, self._servers.get(t.address)) for t in targets]
        return {
            address: Sample.build(
                address=address,
                values=[
                    (Signal.DECODE_STEP_S, server.step_s),
                    (Signal.RUNNING, server.running),
                    (Signal.WAITING, 1.0),
                    (Signal.KV_USAGE, 0.4),
                ],
                observed_at=self._clock() - 1.0,
                source="prometheus",
            )
            for address, server in found
            if server is not None
        }


def _observation(finished: inputs.Finished, *, pool: str) -> Observation:
    return Observation(
        cluster=pool,
        address=finished.address,
        finished_at=finished.finished_at,
        ttfb_s=finished.ttfb_s,
        duration_s=finished.duration_s,
        response_bytes=finished.response_bytes,
        request_bytes=finished.request_bytes,
        status=200,
        failed=False,
        streamed=True,
        stream_id=finished.stream_id,
    )


def _endpoints_at(
    every: Mapping[str, tuple[Endpoint, ...]], cycle: int
) -> dict[str, tuple[Endpoint, ...]]:
    endpoints = dict(every)
    if cycle >= inputs.REMOVED_AT:
        endpoints["chat"] = tuple(e for e in endpoints["chat"] if e.address != inputs.REMOVED)
    return endpoints


def weights_run() -> tuple[list[dict[str, Any]], list[EngineWeights]]:
    """Each cycle's published weight and health per endpoint and each route's pool weights;
    and each cycle's ``EngineWeights`` (what the reconcile step takes)."""
    config = parse_config(text=inputs.FLEET)
    rng = random.Random(48)
    servers = inputs.fleet_servers(rng)
    batch = inputs.batch_servers(rng)
    now, cycle = [inputs.T0], [0]

    def clock() -> float:
        return now[0]

    failing = inputs.FAILING
    client = _Client({**servers, **batch}, lambda a: a == failing and cycle[0] >= inputs.FAILING_AT)
    scrape = ScrapeSource(
        client=cast(aiohttp.ClientSession, client), config=config.signals, clock=clock
    )
    data_path = DataPath(config=DataPathConfig(enabled=True))
    prometheus = _Prometheus(batch, clock)
    weigher = Weigher(
        prometheus=prometheus,
        scrape=scrape,
        data_path=data_path,
        clock=clock,
    )
    # The data path read as a source from the start, as `configure` does when it is on; the
    # other sources stay these stand-ins (configure would build real clients).
    weigher._data_path_source = DataPathSource(data_path=data_path, clock=clock)
    every = {p.name: to_endpoints(p.endpoints) for p in config.pools}
    pool_of = {e.address: pool for pool, eps in every.items() for e in eps}
    rows: list[dict[str, Any]] = []
    published: list[EngineWeights] = []

    async def run() -> None:
        for n in range(inputs.CYCLES):
            cycle[0] = prometheus.cycle = n
            now[0] = inputs.T0 + n * inputs.CYCLE_S
            if n == inputs.SLOWED_AT:
                servers[inputs.SLOWED].step_s *= 4.0
            endpoints = _endpoints_at(every, n)
            live = {e.address for eps in endpoints.values() for e in eps}
            for server in [*servers.values(), *batch.values()]:
                if server.address not in live:
                    continue
                server.advance(inputs.CYCLE_S)
                if server.address == inputs.NO_METRICS and n >= inputs.SILENT_AT:
                    continue  # no request ends on it any more: its window empties
                for finished in server.finished(now=now[0]):
                    pool = pool_of[server.address]
                    data_path.window.add(_observation(finished, pool=pool), now=now[0])
            await scrape.fetch(targets_of(config, endpoints))
            await weigher.fetch(config=config, endpoints=endpoints)
            weights = weigher.decide(config=config, endpoints=endpoints)
            published.append(weights)
            view = weigher.view()
            rows.append(
                {
                    "cycle": n,
                    "endpoints": {
                        pool: {d.address: [d.weight, d.health.value] for d in decided}
                        for pool, decided in view.pools.items()
                    },
                    "routes": {
                        route: {pool: w.weight for pool, w in pools.items()}
                        for route, pools in view.routes.items()
                    },
                    "pool_weights": weights.pools,
                }
            )

    asyncio.run(run())
    return rows, published


# -------------------------------------------------------------------------------- snapshots


def _budgets(config: Config, *, p99: float) -> Buckets:
    limiter = Limiter(clock=lambda: inputs.T0)
    for step in range(3):
        limiter.observe({"chat": Latency(ttft_p99_s=p99 + step, tpot_p99_s=0.05)})
        limiter.decide(config)
    return limiter.buckets(config, envoys={"default": 2, "edge": 3, "team": 1})


def _digest(snapshots: Mapping[str, Snapshot]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, snap in snapshots.items():
        resources: dict[str, str] = {}
        for kind in (snap.clusters, snap.load_assignments, snap.listeners, snap.route_configs):
            short = kind.type_url.rsplit(".", 1)[-1]
            for name, prepared in kind.resources.items():
                data = prepared.message.SerializeToString(deterministic=True)
                resources[f"{short}/{name}"] = hashlib.sha256(data).hexdigest()
        out[group] = {"version": snap.version, "resources": resources}
    return out


def snapshots_run(published: list[EngineWeights]) -> list[dict[str, Any]]:
    """Each fixed config with the engine's weights of a few cycles (none: static weights): the
    version per node group and a sha256 of each resource's serialized bytes."""
    rows = []
    configs = (("flat", inputs.SNAPSHOT_CONFIG), ("groups", inputs.SNAPSHOT_CONFIG + inputs.GROUPS))
    for name, text in configs:
        config = parse_config(text=text)
        endpoints = {p.name: to_endpoints(p.endpoints) for p in config.pools}
        for cycle in (None, 5, 19, 30, inputs.CYCLES - 1):
            weights = EngineWeights() if cycle is None else published[cycle]
            inputs_ = ReconcileInputs(
                config=config,
                endpoints=endpoints,
                weights=weights.endpoints,
                pool_weights=weights.pools,
                budgets=_budgets(config, p99=3.0 if cycle is None else 1.0 + cycle / 10),
            )
            groups = _digest(reconcile_groups(inputs_))
            rows.append({"config": name, "weights_of_cycle": cycle, "groups": groups})
    return rows


# ---------------------------------------------------------------------------------- picker


def _decisions(*, late: bool, at: float) -> dict[str, tuple[WeightDecision, ...]]:
    out: dict[str, tuple[WeightDecision, ...]] = {}
    for pool, table in inputs.PICKER_DECISIONS.items():
        decided = []
        for address, (weight, capacity, waiting, kv) in table.items():
            sample = Sample.build(
                address=address,
                values=[(Signal.WAITING, waiting), (Signal.KV_USAGE, kv), (Signal.RUNNING, 8.0)],
                observed_at=at,
                source="scrape",
            )
            unhealthy = late and address == inputs.UNHEALTHY
            decided.append(
                steady_decision(
                    address=address,
                    weight=10 if late and address == inputs.LOSES_WEIGHT else weight,
                    health=Health.UNHEALTHY if unhealthy else Health.HEALTHY,
                    factors=Factors(capacity=capacity),
                    sample=sample,
                )
            )
        out[pool] = tuple(decided)
    return out


def _tokenize(doc: Mapping[str, Any], /, *, wanted: Wanted | None = None) -> TokenIds:
    return TokenIds(ids=inputs.token_ids(doc["messages"]), share=1.0)


def _events(raw: list[tuple[object, ...]]) -> list[KvEvent]:
    out: list[KvEvent] = []
    for event in raw:
        if event[0] == "stored":
            _, block, parent, ids = event
            out.append(
                BlocksStored(
                    block_hashes=[cast(int, block)],
                    parent_block_hash=cast("int | None", parent),
                    token_ids=cast("list[int]", ids),
                    block_size=inputs.BLOCK,
                )
            )
        else:
            out.append(BlocksRemoved(block_hashes=cast("list[int | bytes]", event[1])))
    return out


def picks_run() -> list[dict[str, Any]]:
    """Each request of ``inputs.requests``: the addresses the picker named, best first (none:
    Envoy's fallback policy decides), and for the saturated pool whether flow control found it
    saturated."""
    config = parse_config(text=inputs.PICKER_CONFIG)
    endpoints = {p.name: to_endpoints(p.endpoints) for p in config.pools}
    now, step = [inputs.T0], [0]
    decisions = [_decisions(late=False, at=inputs.T0)]
    cached = CachedBlocks()
    picker = Picker(
        fleet=Fleet(
            config=lambda: config, endpoints=lambda: endpoints, decisions=lambda: decisions[0]
        ),
        clock=lambda: now[0],
        cached_blocks=cached,
        tokenizers=lambda pool: _tokenize,
        stale=lambda pool, address: address == inputs.STALE and step[0] >= inputs.STALE_FROM,
    )
    caches = {address: inputs.KvCache() for address in inputs.PUBLISHING}
    open_requests: list[tuple[int, str]] = []
    rows: list[dict[str, Any]] = []
    for request in inputs.requests():
        i, pool = request.i, request.pool
        step[0], now[0] = i, inputs.T0 + i * 0.25
        if i % 20 == 0:  # the engine's next cycle: fresh readings
            decisions[0] = _decisions(late=i >= inputs.REWEIGH_AT, at=now[0])
        chosen = list(picker.pick(pool=pool, body=request.body, request=i).addresses)
        row: dict[str, Any] = {"i": i, "pool": pool, "kind": request.kind, "chosen": chosen}
        if pool == "busy":
            row["saturated"] = picker.saturated(pool)
        rows.append(row)
        if chosen:
            served = chosen[1] if request.elsewhere and len(chosen) > 1 else chosen[0]
            picker.served(pool=pool, request=i, address=served)
            if served in caches:
                cached.apply(served, _events(caches[served].prefill(request.token_ids)))
            open_requests.append((i, pool))
        while len(open_requests) > 6:
            done, done_pool = open_requests.pop(0)
            picker.end(pool=done_pool, request=done)
    return rows


def record() -> dict[str, Any]:
    """The whole record, as ``golden.json`` holds it."""
    weights, published = weights_run()
    return {"weights": weights, "snapshots": snapshots_run(published), "picks": picks_run()}


def dumps(found: Mapping[str, Any]) -> str:
    """``found`` as JSON text: keys sorted, so that the text is a function of the values."""
    return json.dumps(found, indent=1, sort_keys=True) + "\n"


if __name__ == "__main__":
    GOLDEN.write_text(dumps(record()), encoding="utf-8")
