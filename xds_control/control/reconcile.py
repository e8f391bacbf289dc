"""One reconcile step: config + endpoints + weights -> a consistent snapshot per node group.
Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from xds_control.config import DEFAULT_GROUP, Config, HighPriorityBreakers, NodeGroup, Pool
from xds_control.discovery import Endpoint, Health
from xds_control.xds import (
    Snapshot,
    WeightedEndpoint,
    build_cluster,
    build_listener,
    build_load_assignment,
    build_route_configuration,
    build_snapshot,
)
from xds_control.xds.picker import with_pickers
from xds_control.xds.routes import Budgets

__all__ = [
    "EndpointWeight",
    "fleet_version",
    "group_config",
    "reconcile_groups",
    "reconcile_once",
]


@dataclass(frozen=True, slots=True)
class EndpointWeight:
    """What the weight engine decided for one address, as EDS will publish it."""

    weight: int
    """1..100 (never 0: Envoy rejects it; an endpoint to avoid is marked, not zeroed)."""
    health: Health = Health.HEALTHY


def reconcile_once(
    *,
    config: Config,
    endpoints: Mapping[str, tuple[Endpoint, ...]],
    weights: Mapping[str, EndpointWeight],
    pool_weights: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
    budgets: Mapping[str, Budgets] | None = None,
) -> Snapshot:
    """The snapshot for ``config`` with each pool's ``endpoints`` (by pool name); an address
    missing from ``weights`` gets its static weight and discovery's health. ``pool_weights``
    (listener -> route -> pool -> weight) splits routes over several pools; without: their
    static weights. ``budgets`` (listener -> route -> class -> bucket): the rate limits of
    listeners with ``limits``."""
    assignments = []
    for pool in config.pools:
        weighted = []
        for endpoint in endpoints.get(pool.name, ()):
            decided = weights.get(endpoint.address)
            weighted.append(
                WeightedEndpoint(
                    host=endpoint.host,
                    port=endpoint.port,
                    weight=endpoint.weight if decided is None else decided.weight,
                    health=endpoint.health
                    if decided is None
                    else _worse(endpoint.health, decided.health),
                )
            )
        assignments.append(build_load_assignment(cluster=pool.name, endpoints=weighted))
    clusters = [
        build_cluster(pool, high_priority=_high_priority(config, pool)) for pool in config.pools
    ]
    listeners = [
        build_listener(listener, model_header=config.model_header) for listener in config.listeners
    ]
    route_configs = [
        build_route_configuration(
            listener,
            model_header=config.model_header,
            pool_weights=(pool_weights or {}).get(listener.name),
            budgets=(budgets or {}).get(listener.name),
        )
        for listener in config.listeners
    ]
    clusters, listeners, route_configs = with_pickers(
        config, clusters=clusters, listeners=listeners, route_configs=route_configs
    )
    return build_snapshot(
        clusters=clusters,
        load_assignments=assignments,
        listeners=listeners,
        route_configs=route_configs,
    )


def _high_priority(config: Config, pool: Pool) -> HighPriorityBreakers | None:
    """The HIGH-priority breakers of the first listener with priority classes that routes to
    ``pool``."""
    for listener in config.listeners:
        if listener.limits is None:
            continue
        if any(pool.name in route.pool_names() for route in listener.routes):
            return listener.limits.high_priority_breakers
    return None


_SEVERITY = {Health.HEALTHY: 0, Health.DRAINING: 1, Health.UNHEALTHY: 2}


def _worse(a: Health, b: Health) -> Health:
    """Discovery's and the engine's word together: a draining pod stays draining however
    well it answers, and a failing one is unhealthy whatever discovery says."""
    return a if _SEVERITY[a] >= _SEVERITY[b] else b


def group_config(config: Config, group: NodeGroup) -> Config:
    """``config`` cut down to what ``group`` serves: its listeners, and its pools with every pool
    those listeners route to; order as in ``config``, so the cut is a content hash like any
    other."""
    pools = group.pool_names(config.listeners)
    listeners = set(group.listeners)
    return config.model_copy(
        update={
            "pools": tuple(p for p in config.pools if p.name in pools),
            "listeners": tuple(lis for lis in config.listeners if lis.name in listeners),
            "node_groups": (),
        }
    )


def reconcile_groups(
    *,
    config: Config,
    endpoints: Mapping[str, tuple[Endpoint, ...]],
    weights: Mapping[str, EndpointWeight],
    pool_weights: Mapping[str, Mapping[str, Mapping[str, int]]] | None = None,
    budgets: Mapping[str, Mapping[str, Budgets]] | None = None,
) -> dict[str, Snapshot]:
    """Group name -> its snapshot, each consistent by itself. Without ``node_groups`` one
    group, ``DEFAULT_GROUP``, with exactly ``reconcile_once``'s snapshot (same version).
    ``budgets`` are per group: each group's Envoys enforce their own share."""
    by_group = budgets or {}
    if not config.node_groups:
        return {
            DEFAULT_GROUP: reconcile_once(
                config=config,
                endpoints=endpoints,
                weights=weights,
                pool_weights=pool_weights,
                budgets=by_group.get(DEFAULT_GROUP),
            )
        }
    return {
        group.name: reconcile_once(
            config=group_config(config, group),
            endpoints=endpoints,
            weights=weights,
            pool_weights=pool_weights,
            budgets=by_group.get(group.name),
        )
        for group in config.node_groups
    }


def fleet_version(snapshots: Mapping[str, Snapshot]) -> str:
    """One version for what is served: the snapshot's own with one group (so it reads as
    before groups existed), else a hash over every group's name and version."""
    if len(snapshots) == 1:
        return next(iter(snapshots.values())).version
    text = "\n".join(f"{name}={snap.version}" for name, snap in sorted(snapshots.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
