"""Server: grpc.aio ADS (state of the world), health and reflection."""

from xds_control.server.ads import AdsHandler
from xds_control.server.grpc_server import XdsServer
from xds_control.server.registry import StreamRegistry
from xds_control.server.stream import AdsStream, TypeState

__all__ = ["AdsHandler", "AdsStream", "StreamRegistry", "TypeState", "XdsServer"]
