"""xDS: pure builders from the model to Envoy resources, and the immutable snapshot."""

from xds_control.xds.bootstrap import build_bootstrap
from xds_control.xds.cluster import build_cluster, build_picker_cluster
from xds_control.xds.endpoints import EndpointWeight, build_load_assignment
from xds_control.xds.listeners import build_listener
from xds_control.xds.routes import build_route_configuration
from xds_control.xds.snapshot import PreparedResource, ResourceSet, Snapshot, build_snapshot

__all__ = [
    "EndpointWeight",
    "PreparedResource",
    "ResourceSet",
    "Snapshot",
    "build_bootstrap",
    "build_cluster",
    "build_listener",
    "build_load_assignment",
    "build_picker_cluster",
    "build_route_configuration",
    "build_snapshot",
]
