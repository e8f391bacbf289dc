"""Control: the reconcile step and the loop that runs it."""

from xds_control.control.loop import ControlLoop, LoopState, endpoint_source
from xds_control.control.reconcile import (
    EndpointWeight,
    fleet_version,
    group_config,
    reconcile_groups,
    reconcile_once,
)
from xds_control.control.weigher import EngineView, Weigher, targets_of

__all__ = [
    "ControlLoop",
    "EndpointWeight",
    "EngineView",
    "LoopState",
    "Weigher",
    "endpoint_source",
    "fleet_version",
    "group_config",
    "reconcile_groups",
    "reconcile_once",
    "targets_of",
]
