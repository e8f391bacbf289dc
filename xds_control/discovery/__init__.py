"""Discovery: which endpoints each pool has (inline, file, DNS, Kubernetes EndpointSlices)."""

from xds_control.discovery.dns import DnsSource, Resolver, system_resolver
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.file import FileSource, FileStamp, file_stamp, parse_endpoints_file
from xds_control.discovery.health import Health
from xds_control.discovery.kubernetes import KubernetesSource
from xds_control.discovery.source import EndpointSource
from xds_control.discovery.static import StaticSource, to_endpoints

__all__ = [
    "DnsSource",
    "Endpoint",
    "EndpointSource",
    "FileSource",
    "FileStamp",
    "Health",
    "KubernetesSource",
    "Resolver",
    "StaticSource",
    "file_stamp",
    "parse_endpoints_file",
    "system_resolver",
    "to_endpoints",
]
