"""Server: grpc.aio ADS (state of the world and incremental), health and reflection."""

from xds_control.server.ads import AdsHandler
from xds_control.server.delta import DeltaStream
from xds_control.server.grpc_server import XdsServer
from xds_control.server.registry import StreamRegistry
from xds_control.server.session import XdsStream
from xds_control.server.state import TypeState
from xds_control.server.stream import AdsStream

__all__ = [
    "AdsHandler",
    "AdsStream",
    "DeltaStream",
    "StreamRegistry",
    "TypeState",
    "XdsServer",
    "XdsStream",
]
