"""Flow control's verdict on one request: go, hold or refuse. Pure records.

``FlowController.admit`` gives one of three: ``Go`` (pick now), ``Hold`` (the pool is
saturated or already holds requests: ``FlowController.wait`` gives the final word, ``Go`` or
``Refuse``), or ``Refuse`` (429 or 503, with the reason the client is told). A request that
matched a token budget carries its ``Charge`` until ``FlowController.finish`` settles it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from xds_control.flow.budgets import Charge
from xds_control.flow.queues import Band
from xds_control.flow.refused import Refused

__all__ = ["Admission", "Go", "Hold", "Refuse"]


@dataclass(frozen=True, slots=True)
class Go:
    """Pick now. ``charge``: what the request was charged (``None``: no budget matched)."""

    charge: Charge | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    """Hold the request: who it is, what it weighs, and how long Envoy is to wait for it."""

    pool: str
    request: Hashable
    tenant: str
    band: Band
    size: int
    """The body's bytes: what it takes of the pool's queue."""
    wait_s: float
    """Its band's ``max_wait_s``: the longest it is held."""
    charge: Charge | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    """Refuse the request with ``refused``'s status, reason and ``retry-after``."""

    refused: Refused


Admission = Go | Hold | Refuse
"""What ``FlowController.admit`` says of a request."""
