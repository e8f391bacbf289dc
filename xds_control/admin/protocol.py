"""The seam between the running plane and admin: what the admin endpoints read, and nothing
they could write.

Each view is a small Protocol of the reads one stage answers (the loop's state, the published
snapshots, the open streams, the budgets, the KV-event subscriptions) or a callable that
answers one value (the engine's last cycle, why the process is failing, the picker's
output-token windows). ``AdminViews`` gathers them in one frozen record that the HTTP server
and the gRPC servicer both take, so a new view is one field here and one read where it is
shown. A Protocol one view function alone reads sits beside it (``LoopStatus`` in
``views.py``, ``LimitRows`` in ``limits.py``, ``KvSubscriptions`` in ``kv_events.py``) and is
named here too. A view left ``None`` is a stage that is not running: its endpoint answers as off.
Nothing here raises; every read is cheap and synchronous, on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from xds_control.admin.kv_events import KvSubscriptions
from xds_control.admin.limits import LimitRows, TokenBudgetRows
from xds_control.admin.views import LoopStatus
from xds_control.control import EngineView
from xds_control.server import XdsStream
from xds_control.server.registry import Origin, StreamListener
from xds_control.xds import Snapshot

__all__ = ["AdminViews", "KvSubscriptions", "LimitRows", "LoopStatus", "Snapshots", "Streams"]


class Snapshots(Protocol):
    """The snapshot each node group is served (``SnapshotCache.snapshot``)."""

    def snapshot(self, group: str) -> Snapshot | None:
        """The group's current snapshot; ``None`` before the first publication."""
        ...


class Streams(Protocol):
    """The open ADS streams (``StreamRegistry``). ``add_listener`` subscribes to their events;
    it changes nothing any Envoy is served."""

    def streams(self) -> list[XdsStream]:
        """The open streams, oldest first."""
        ...

    def describe(self) -> list[dict[str, Any]]:
        """Every open stream's view, by node id."""
        ...

    def origin(self, stream_id: int) -> Origin:
        """Where and when an open stream came from."""
        ...

    def add_listener(self, listener: StreamListener) -> None:
        """Tell ``listener`` of every connect, push, ACK, NACK and disconnect from now on."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminViews:
    """Every view admin reads, in one record; the optional ones ``None`` when off."""

    state: LoopStatus
    cache: Snapshots
    registry: Streams
    engine: Callable[[], EngineView] | None = None
    """The engine's last cycle; ``None``: no engine (static weights)."""
    failure: Callable[[], str | None] | None = None
    """Why the process is not ready although it serves a snapshot (a critical task died; the
    process is about to exit), or ``None``."""
    limiter: LimitRows | None = None
    kv_events: KvSubscriptions | None = None
    token_budgets: TokenBudgetRows | None = None
    """The picker's output-token windows, for ``/v1/limits``."""
