"""One reconcile step: config + endpoints + weights -> a consistent snapshot per node group.
Pure: the snapshot is a function of ``ReconcileInputs`` alone."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from envoy.config.cluster.v3 import cluster_pb2

from xds_control.config import DEFAULT_GROUP, Config, HighPriorityBreakers, NodeGroup, Pool
from xds_control.config.picker import PoolPicker
from xds_control.discovery import Endpoint
from xds_control.limits import Buckets
from xds_control.xds import (
    EndpointWeight,
    Snapshot,
    build_cluster,
    build_listener,
    build_load_assignment,
    build_picker_cluster,
    build_route_configuration,
    build_snapshot,
)

__all__ = [
    "PoolWeights",
    "ReconcileInputs",
    "fleet_version",
    "group_config",
    "reconcile_groups",
    "reconcile_once",
]

PoolWeights = Mapping[str, Mapping[str, Mapping[str, int]]]
"""Listener -> route -> pool -> weight: the engine's split of each route over several pools."""


@dataclass(frozen=True, slots=True)
class ReconcileInputs:
    """Everything the snapshots are built from. Equal inputs build equal snapshots, so the
    loop skips a step whose inputs equal the last published ones. Equality is by value and
    cheap when little changed: an unchanged config and each unchanged pool's endpoint tuple
    are the objects of the last step, which compare at once; the weights are small frozen
    records."""

    config: Config
    endpoints: Mapping[str, tuple[Endpoint, ...]]
    """Pool name -> its endpoints, as discovery found them."""
    weights: Mapping[str, EndpointWeight] = field(default_factory=dict)
    """Address -> the engine's weight; an address missing gets its static weight and
    discovery's health."""
    pool_weights: PoolWeights = field(default_factory=dict)
    """How routes over several pools split; a route missing keeps its pools' static weights."""
    budgets: Buckets = field(default_factory=Buckets)
    """Every node group's buckets: the rate limits of listeners with ``limits``; each group's
    Envoys enforce their own share."""


def reconcile_once(inputs: ReconcileInputs, *, group: NodeGroup | None = None) -> Snapshot:
    """The snapshot of ``group``: its cut of the config (``group_config``) with its budgets;
    without a group, of the whole config with ``DEFAULT_GROUP``'s budgets. Each pool with a
    ``picker`` is built with it: its cluster balances by the picker's answer, the listeners
    routing to it ask the picker, and the picker's own cluster joins the pools' clusters."""
    config = inputs.config if group is None else group_config(inputs.config, group)
    budgets = inputs.budgets.of_group(DEFAULT_GROUP if group is None else group.name)
    pickers = {pool.name: pool.picker for pool in config.pools if pool.picker is not None}
    return build_snapshot(
        clusters=_clusters(config, pickers),
        load_assignments=[
            build_load_assignment(
                cluster=pool.name,
                endpoints=inputs.endpoints.get(pool.name, ()),
                weights=inputs.weights,
            )
            for pool in config.pools
        ],
        listeners=[
            build_listener(
                listener,
                model_header=config.model_header,
                pickers=pickers,
                data_path=config.signals.data_path.on,
            )
            for listener in config.listeners
        ],
        route_configs=[
            build_route_configuration(
                listener,
                model_header=config.model_header,
                pool_weights=inputs.pool_weights.get(listener.name),
                budgets=budgets,
                pickers=pickers,
                pools={pool.name for pool in config.pools},
            )
            for listener in config.listeners
        ],
    )


def _clusters(config: Config, pickers: Mapping[str, PoolPicker]) -> list[cluster_pb2.Cluster]:
    """The pools' clusters, then one per address Envoy dials a picker at (pools may share
    a picker)."""
    pools = [
        build_cluster(pool, high_priority=_high_priority(config, pool)) for pool in config.pools
    ]
    addresses = sorted({picker.dial_address for picker in pickers.values()})
    return pools + [build_picker_cluster(address) for address in addresses]


def _high_priority(config: Config, pool: Pool) -> HighPriorityBreakers | None:
    """The HIGH-priority breakers of the first listener with priority classes that routes to
    ``pool``."""
    for listener in config.listeners:
        if listener.limits is None:
            continue
        if any(pool.name in route.pool_names() for route in listener.routes):
            return listener.limits.high_priority_breakers
    return None


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


def reconcile_groups(inputs: ReconcileInputs) -> dict[str, Snapshot]:
    """Group name -> its snapshot, each consistent by itself. Without ``node_groups`` one
    group, ``DEFAULT_GROUP``, with exactly ``reconcile_once``'s snapshot (same version)."""
    if not inputs.config.node_groups:
        return {DEFAULT_GROUP: reconcile_once(inputs)}
    return {group.name: reconcile_once(inputs, group=group) for group in inputs.config.node_groups}


def fleet_version(snapshots: Mapping[str, Snapshot]) -> str:
    """One version for what is served: the snapshot's own with one group (so it reads as
    before groups existed), else a hash over every group's name and version."""
    if len(snapshots) == 1:
        return next(iter(snapshots.values())).version
    text = "\n".join(f"{name}={snap.version}" for name, snap in sorted(snapshots.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
