"""xDS protocol constants, in one place: type URLs, the ADS service and method names, and the
field numbers the prepared-bytes framing writes (``xds/wire.py``) for both protocol variants,
state of the world and incremental (delta)."""

from __future__ import annotations

from typing import Final

from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2
from google.protobuf.message import Message

__all__ = [
    "ADS_METHOD",
    "ADS_SERVICE",
    "ANY_TYPE_URL",
    "ANY_VALUE",
    "CLUSTER",
    "DELTA_ADS_METHOD",
    "DELTA_CONTROL_PLANE",
    "DELTA_NONCE",
    "DELTA_REMOVED_RESOURCES",
    "DELTA_RESOURCES",
    "DELTA_SYSTEM_VERSION_INFO",
    "DELTA_TYPE_URL",
    "ENDPOINT",
    "LISTENER",
    "ORDER",
    "RESOURCE_NAME",
    "RESOURCE_RESOURCE",
    "RESOURCE_VERSION",
    "RESPONSE_CONTROL_PLANE",
    "RESPONSE_NONCE",
    "RESPONSE_RESOURCES",
    "RESPONSE_TYPE_URL",
    "RESPONSE_VERSION_INFO",
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

ADS_SERVICE: Final = "envoy.service.discovery.v3.AggregatedDiscoveryService"
"""The gRPC service name: health checks and reflection name it too."""
ADS_METHOD: Final = f"/{ADS_SERVICE}/StreamAggregatedResources"
DELTA_ADS_METHOD: Final = f"/{ADS_SERVICE}/DeltaAggregatedResources"


def _field_number(message: type[Message], field: str) -> int:
    # From the descriptor the generated code carries: a number cannot be mistyped here.
    return int(message.DESCRIPTOR.fields_by_name[field].number)


_RESPONSE = discovery_pb2.DiscoveryResponse
RESPONSE_VERSION_INFO: Final = _field_number(_RESPONSE, "version_info")
RESPONSE_RESOURCES: Final = _field_number(_RESPONSE, "resources")
RESPONSE_TYPE_URL: Final = _field_number(_RESPONSE, "type_url")
RESPONSE_NONCE: Final = _field_number(_RESPONSE, "nonce")
RESPONSE_CONTROL_PLANE: Final = _field_number(_RESPONSE, "control_plane")
"""``DiscoveryResponse`` field numbers: a response is framed from these (``xds/snapshot.py``)."""

ANY_TYPE_URL: Final = _field_number(any_pb2.Any, "type_url")
ANY_VALUE: Final = _field_number(any_pb2.Any, "value")
"""``google.protobuf.Any`` field numbers: each resource is framed as one."""

_DELTA = discovery_pb2.DeltaDiscoveryResponse
DELTA_SYSTEM_VERSION_INFO: Final = _field_number(_DELTA, "system_version_info")
DELTA_RESOURCES: Final = _field_number(_DELTA, "resources")
DELTA_TYPE_URL: Final = _field_number(_DELTA, "type_url")
DELTA_NONCE: Final = _field_number(_DELTA, "nonce")
DELTA_REMOVED_RESOURCES: Final = _field_number(_DELTA, "removed_resources")
DELTA_CONTROL_PLANE: Final = _field_number(_DELTA, "control_plane")
"""``DeltaDiscoveryResponse`` field numbers: the incremental protocol's responses."""

RESOURCE_NAME: Final = _field_number(discovery_pb2.Resource, "name")
RESOURCE_VERSION: Final = _field_number(discovery_pb2.Resource, "version")
RESOURCE_RESOURCE: Final = _field_number(discovery_pb2.Resource, "resource")
"""``Resource`` field numbers: each delta response entry names its resource and its digest."""
