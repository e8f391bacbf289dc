"""Flow control: the picker holds requests while a pool is saturated (docs/flow-control.md)."""

from xds_control.flow.budgets import Charge, TokenBudgets, estimate_tokens
from xds_control.flow.controller import FlowController
from xds_control.flow.queues import Band, FlowQueues, Held
from xds_control.flow.refused import Refused
from xds_control.flow.saturation import saturated

__all__ = [
    "Band",
    "Charge",
    "FlowController",
    "FlowQueues",
    "Held",
    "Refused",
    "TokenBudgets",
    "estimate_tokens",
    "saturated",
]
