"""Two pools behind one listener, and a watcher that reads Envoy's admin API over and over
while a change lands: the ordering tests (make-before-break) look at what it saw."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from e2e.stack import EchoStack
from xds_lab.harness.backends import BACKEND_HEADER
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.traffic import count_backends


def two_pool_config(
    stack: EchoStack, *, chat: int = 10, extra: int | None = 10, fresh: int | None = None
) -> dict[str, Any]:
    """Pool ``chat`` (backend 0) for every path; ``extra`` (backend 1) behind ``/extra`` and
    ``fresh`` (backend 1) behind ``/fresh`` when given a weight."""
    backends = stack.backends
    pools = [{"name": "chat", "endpoints": [{"address": backends.address(0), "weight": chat}]}]
    routes: list[dict[str, Any]] = [{"name": "all", "pool": "chat"}]
    for name, weight in (("extra", extra), ("fresh", fresh)):
        if weight is not None:
            endpoint = {"address": backends.address(1), "weight": weight}
            pools.append({"name": name, "endpoints": [endpoint]})
            routes.insert(0, {"name": name, "pool": name, "match": {"prefix": f"/{name}"}})
    listener = {
        "name": "gateway",
        "address": f"127.0.0.1:{stack.listener_port}",
        "routes": routes,
    }
    return {"pools": pools, "listeners": [listener]}


@dataclass
class Seen:
    """What the watcher saw, poll after poll."""

    polls: int = 0
    emptied: list[str] = field(default_factory=list)
    """"<cluster>" each time a cluster that had hosts showed none."""
    dangling: list[str] = field(default_factory=list)
    """"<route> -> <cluster>" each time a route named a cluster Envoy did not have."""


def _route_targets(dump: dict[str, Any]) -> tuple[set[str], set[str]]:
    clusters: set[str] = set()
    targets: set[str] = set()
    for config in dump["configs"]:
        kind = config["@type"]
        if kind.endswith("ClustersConfigDump"):
            for key in ("dynamic_active_clusters", "dynamic_warming_clusters"):
                clusters.update(c["cluster"]["name"] for c in config.get(key, []))
            clusters.update(c["cluster"]["name"] for c in config.get("static_clusters", []))
        elif kind.endswith("RoutesConfigDump"):
            for table in config.get("dynamic_route_configs", []):
                for host in table["route_config"].get("virtual_hosts", []):
                    for route in host.get("routes", []):
                        if cluster := route.get("route", {}).get("cluster"):
                            targets.add(f"{route.get('name', '')} -> {cluster}")
    return clusters, targets


async def watch(envoy: EnvoyProcess, done: asyncio.Event) -> Seen:
    """Poll ``/config_dump`` and ``/clusters`` until ``done``; record every moment a route
    named a missing cluster and every moment a cluster lost all its hosts."""
    seen = Seen()
    had_hosts: set[str] = set()
    while not done.is_set():
        clusters, targets = _route_targets(json.loads(await envoy.admin_get("/config_dump")))
        seen.dangling += sorted(t for t in targets if t.split(" -> ")[1] not in clusters)
        statuses = json.loads(await envoy.admin_get("/clusters?format=json"))
        for status in statuses.get("cluster_statuses", []):
            name, hosts = status["name"], status.get("host_statuses", [])
            if hosts:
                had_hosts.add(name)
            elif name in had_hosts:
                seen.emptied.append(name)
        had_hosts &= {s["name"] for s in statuses.get("cluster_statuses", [])}
        seen.polls += 1
        await asyncio.sleep(0.01)
    return seen


async def keep_sending(stack: EchoStack, path: str, done: asyncio.Event) -> Counter[str]:
    """Requests to ``path`` in small batches until ``done``: who answered, and any failure."""
    total: Counter[str] = Counter()
    while not done.is_set():
        total += await count_backends(
            url=f"{stack.url}{path}",
            count=8,
            headers_for=lambda i: {"x-prefix-hash": f"k-{i}"},
            backend_header=BACKEND_HEADER,
            concurrency=2,
        )
    return total
