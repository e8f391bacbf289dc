"""Engine: pure functions from signals to endpoint weights (1..100) with their explanation."""

from xds_control.engine.capacity import fleet_step_scale
from xds_control.engine.compute import changed_meaningfully, compute_weights
from xds_control.engine.decision import (
    EndpointState,
    Explanation,
    Factors,
    WeightDecision,
    states_of,
)
from xds_control.engine.inputs import WEIGHT_SIGNALS

__all__ = [
    "WEIGHT_SIGNALS",
    "EndpointState",
    "Explanation",
    "Factors",
    "WeightDecision",
    "changed_meaningfully",
    "compute_weights",
    "fleet_step_scale",
    "states_of",
]
