"""xDS type URLs and other protocol constants, in one place."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ADS_METHOD",
    "CLUSTER",
    "DELTA_ADS_METHOD",
    "ENDPOINT",
    "LISTENER",
    "ORDER",
    "ROUTE",
    "SHORT_NAMES",
    "WILDCARD_TYPES",
]

_PREFIX: Final = "type.googleapis.com/envoy.config"
CLUSTER: Final = f"{_PREFIX}.cluster.v3.Cluster"
ENDPOINT: Final = f"{_PREFIX}.endpoint.v3.ClusterLoadAssignment"
LISTENER: Final = f"{_PREFIX}.listener.v3.Listener"
ROUTE: Final = f"{_PREFIX}.route.v3.RouteConfiguration"

ORDER: Final = (CLUSTER, ENDPOINT, LISTENER, ROUTE)
"""Push order that never leaves Envoy pointing at a resource it has not been sent yet."""

WILDCARD_TYPES: Final = frozenset({CLUSTER, LISTENER})
"""Types whose every SotW response carries the complete set (others may carry only changes)."""

SHORT_NAMES: Final = {CLUSTER: "CDS", ENDPOINT: "EDS", LISTENER: "LDS", ROUTE: "RDS"}

ADS_METHOD: Final = (
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
)
DELTA_ADS_METHOD: Final = (
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)
