"""xDS protocol constants, in one place: type URLs, the ADS service and method names, and the
field numbers the prepared-bytes framing writes (``xds/wire.py``)."""

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
    "ENDPOINT",
    "LISTENER",
    "ORDER",
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
