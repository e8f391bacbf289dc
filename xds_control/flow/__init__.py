"""Flow control: the picker holds requests while a pool is saturated (docs/flow-control.md)."""

from xds_control.flow.admission import Admission, Go, Hold, Refuse
from xds_control.flow.budgets import Charge, TokenBudgets, estimate_tokens
from xds_control.flow.controller import FlowController
from xds_control.flow.queues import Band, FlowQueues, Held
from xds_control.flow.refused import Refused
from xds_control.flow.saturation import Saturation, saturated

__all__ = [
    "Admission",
    "Band",
    "Charge",
    "FlowController",
    "FlowQueues",
    "Go",
    "Held",
    "Hold",
    "Refuse",
    "Refused",
    "Saturation",
    "TokenBudgets",
    "estimate_tokens",
    "saturated",
]
