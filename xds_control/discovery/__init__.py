"""Discovery: which endpoints each pool has (inline, file; DNS and Kubernetes later)."""

from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.file import FileSource, FileStamp, file_stamp, parse_endpoints_file
from xds_control.discovery.health import Health
from xds_control.discovery.source import EndpointSource
from xds_control.discovery.static import StaticSource, to_endpoints

__all__ = [
    "Endpoint",
    "EndpointSource",
    "FileSource",
    "FileStamp",
    "Health",
    "StaticSource",
    "file_stamp",
    "parse_endpoints_file",
    "to_endpoints",
]
