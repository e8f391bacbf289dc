"""Discovery: which endpoints each pool has (inline, file, DNS, Kubernetes EndpointSlices,
InferencePools)."""

from xds_control.discovery.dns import DnsSource, Resolver, system_resolver
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.file import FileSource, FileStamp, file_stamp, parse_endpoints_file
from xds_control.discovery.gateways import (
    CONTROL_PLANES,
    FleetSize,
    fleet_key,
    follow_fleets,
    sized_fleets,
)
from xds_control.discovery.health import Health
from xds_control.discovery.kubernetes import (
    FailureMode,
    InferencePoolCatalog,
    InferencePoolSource,
    KubernetesSource,
)
from xds_control.discovery.pool_sources import (
    carry_over,
    close_sources,
    endpoint_source,
    endpoints_path,
    failure_modes,
)
from xds_control.discovery.protocol import EndpointSource
from xds_control.discovery.static import StaticSource, to_endpoints

__all__ = [
    "CONTROL_PLANES",
    "DnsSource",
    "Endpoint",
    "EndpointSource",
    "FailureMode",
    "FileSource",
    "FileStamp",
    "FleetSize",
    "Health",
    "InferencePoolCatalog",
    "InferencePoolSource",
    "KubernetesSource",
    "Resolver",
    "StaticSource",
    "carry_over",
    "close_sources",
    "endpoint_source",
    "endpoints_path",
    "failure_modes",
    "file_stamp",
    "fleet_key",
    "follow_fleets",
    "parse_endpoints_file",
    "sized_fleets",
    "system_resolver",
    "to_endpoints",
]
