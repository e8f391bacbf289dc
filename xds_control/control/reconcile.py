"""One reconcile step: config + endpoints + weights -> a consistent snapshot. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from xds_control.config import Config
from xds_control.discovery import Endpoint
from xds_control.xds import (
    Health,
    Snapshot,
    WeightedEndpoint,
    build_cluster,
    build_listener,
    build_load_assignment,
    build_route_configuration,
    build_snapshot,
)

__all__ = ["EndpointWeight", "reconcile_once"]

EndpointWeight = tuple[int, Health]
"""What the weight engine decided for one address: (weight 1..100, health)."""


def reconcile_once(
    *,
    config: Config,
    endpoints: Mapping[str, tuple[Endpoint, ...]],
    weights: Mapping[str, EndpointWeight],
) -> Snapshot:
    """The snapshot for ``config`` with each pool's ``endpoints`` (by pool name); an address
    missing from ``weights`` gets its static weight, healthy."""
    assignments = []
    for pool in config.pools:
        weighted = []
        for endpoint in endpoints.get(pool.name, ()):
            weight, health = weights.get(endpoint.address, (endpoint.weight, Health.HEALTHY))
            weighted.append(
                WeightedEndpoint(
                    host=endpoint.host, port=endpoint.port, weight=weight, health=health
                )
            )
        assignments.append(build_load_assignment(cluster=pool.name, endpoints=weighted))
    return build_snapshot(
        clusters=[build_cluster(pool) for pool in config.pools],
        load_assignments=assignments,
        listeners=[build_listener(listener) for listener in config.listeners],
        route_configs=[
            build_route_configuration(listener, model_header=config.model_header)
            for listener in config.listeners
        ],
    )
