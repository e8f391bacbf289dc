"""One reconcile step: config + endpoints + weights -> a consistent snapshot. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xds_control.config import Config
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

__all__ = ["EndpointWeight", "reconcile_once"]


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
) -> Snapshot:
    """The snapshot for ``config`` with each pool's ``endpoints`` (by pool name); an address
    missing from ``weights`` gets its static weight, healthy."""
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
                    health=Health.HEALTHY if decided is None else decided.health,
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
