"""Control: the reconcile step and the loop that runs it."""

from xds_control.control.loop import ControlLoop, LoopState, endpoint_source
from xds_control.control.reconcile import EndpointWeight, reconcile_once
from xds_control.control.weigher import EngineView, Weigher, targets_of

__all__ = [
    "ControlLoop",
    "EndpointWeight",
    "EngineView",
    "LoopState",
    "Weigher",
    "endpoint_source",
    "reconcile_once",
    "targets_of",
]
