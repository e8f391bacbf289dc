"""The flow controller: holds a picker pool's requests while it is saturated and lets them go
one at a time as servers free up (per control-plane replica).

``admit`` is the one way in: at once when nothing waits and the pool has room, else the
request waits in the pool's ``FlowQueues`` until ``release`` dispatches it (a server answered
or finished one, a reading changed, or the controller's tick), it times out, or its queue is
full. ``release`` dispatches one request per pool and no other until that one has returned from
``admit`` (its caller picks at once, in the same step), then looks again (``call_soon``): the
pick's own load counts before the next is let go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable

import structlog

from xds_control.config.flow import FlowControl
from xds_control.flow.budgets import TokenBudgets
from xds_control.flow.metrics import FLOW_OUTCOMES, FLOW_QUEUED, FLOW_WAIT_SECONDS
from xds_control.flow.queues import Band, FlowQueues, Held
from xds_control.flow.refused import Refused
from xds_control.flow.shares import TenantShares

__all__ = ["TICK_S", "FlowController"]

log = structlog.get_logger(__name__)

TICK_S = 0.05
"""How often the controller looks at the pools holding requests without being told."""


class FlowController:
    """``settings(pool)``: the pool's flow control (``None``: off); ``saturated(pool)``: no
    server has room; ``ready(pool)``: some server is healthy."""

    def __init__(
        self,
        *,
        settings: Callable[[str], FlowControl | None],
        saturated: Callable[[str], bool],
        ready: Callable[[str], bool],
        clock: Callable[[], float] = time.monotonic,
        replicas: Callable[[], int] = lambda: 1,
    ) -> None:
        """``replicas()``: the control planes sharing each token budget (``TokenBudgets``)."""
        self._settings = settings
        self._saturated = saturated
        self._ready = ready
        self._clock = clock
        self._queues: dict[str, FlowQueues] = {}
        self._waiting: dict[Held, asyncio.Future[None]] = {}
        self._in_transit: dict[str, int] = {}
        """Pool -> requests dispatched that have not yet returned from ``admit``."""
        self._tenant_shares: dict[str, TenantShares] = {}
        self.budgets = TokenBudgets(clock=clock, replicas=replicas)
        """The pools' output-token budgets, charged and settled by the picker's exchanges."""

    def holds(self, pool: str) -> bool:
        """A request for ``pool`` now would be held: the pool has flow control and either
        holds requests already (arrival order) or is saturated."""
        settings = self._settings(pool)
        if settings is None:
            return False
        queue = self._queues.get(pool)
        return bool(queue) or self._saturated(pool)

    def queued(self, pool: str) -> int:
        """Requests ``pool`` holds now."""
        queue = self._queues.get(pool)
        return 0 if queue is None else len(queue)

    def let_through(self, *, pool: str, tenant: str) -> None:
        """A request of ``tenant`` went on at once, nothing held: it counts for the tenant's
        share as a dispatched one does."""
        self._shares(pool).served(tenant, now=self._clock())

    async def admit(
        self, *, pool: str, band: Band, tenant: str, size: int, request: Hashable
    ) -> None:
        """Return once ``request`` may be picked; raise ``Refused`` if it may not."""
        settings = self._settings(pool)
        if settings is None:
            return
        if not self.holds(pool):
            self.let_through(pool=pool, tenant=tenant)
            return
        queue = self._queue(pool, settings)
        held = Held(request=request, band=band, tenant=tenant, size=size, arrived=self._clock())
        reason = queue.push(held)
        if reason is not None:
            FLOW_OUTCOMES.labels(pool=pool, outcome=reason).inc()
            raise Refused(status=429, reason=reason)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[held] = waiter
        FLOW_QUEUED.labels(pool=pool, band=band.name.lower()).inc()
        try:
            # not wait_for: see wait_set
            async with asyncio.timeout(settings.wait_s(band.name.lower())):
                await asyncio.shield(waiter)
        except TimeoutError:
            if waiter.done():  # dispatched as the wait ran out: it goes
                return
            queue.remove(held)
            refusal = (
                Refused(status=429, reason="max-wait")
                if self._ready(pool)
                else Refused(status=503, reason="no-ready-endpoint")
            )
            FLOW_OUTCOMES.labels(pool=pool, outcome=refusal.reason).inc()
            raise refusal from None
        except asyncio.CancelledError:
            queue.remove(held)  # the client left, or Envoy gave up on the stream
            FLOW_OUTCOMES.labels(pool=pool, outcome="cancelled").inc()
            raise
        finally:
            FLOW_QUEUED.labels(pool=pool, band=band.name.lower()).dec()
            self._waiting.pop(held, None)
            if waiter.done():  # dispatched (perhaps just before a timeout or a cancel)
                self._in_transit[pool] -= 1
                # The caller picks before this runs, so the next look sees the pick's load.
                asyncio.get_running_loop().call_soon(self.release)
        FLOW_OUTCOMES.labels(pool=pool, outcome="dispatched").inc()
        FLOW_WAIT_SECONDS.labels(pool=pool).observe(self._clock() - held.arrived)

    def _shares(self, pool: str) -> TenantShares:
        shares = self._tenant_shares.get(pool)
        if shares is None:
            shares = self._tenant_shares[pool] = TenantShares()
        return shares

    def _queue(self, pool: str, settings: FlowControl) -> FlowQueues:
        queue = self._queues.get(pool)
        if queue is None or (queue.max_queued, queue.max_bytes) != (
            settings.max_queued,
            settings.max_queued_bytes,
        ):
            fresh = FlowQueues(max_queued=settings.max_queued, max_bytes=settings.max_queued_bytes)
            if queue is not None:  # new bounds: what waits keeps its place
                while (held := queue.pop()) is not None:
                    fresh.push(held)
            queue = self._queues[pool] = fresh
        return queue

    def release(self) -> None:
        """Dispatch the next held request of each pool that has room and none dispatched
        still on its way (never raises)."""
        for pool, queue in list(self._queues.items()):
            try:
                if not queue or self._in_transit.get(pool, 0) or self._saturated(pool):
                    continue
            except Exception:  # a broken reading must not stop the queues for good
                log.exception("saturation check failed", pool=pool)
                continue
            shares, now = self._shares(pool), self._clock()
            held = queue.pop(over=shares.over(queue.tenants(), now=now))
            if held is None:
                continue
            waiter = self._waiting.get(held)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
                shares.served(held.tenant, now=now)
                self._in_transit[pool] = self._in_transit.get(pool, 0) + 1

    async def run(self) -> None:
        """Look at the holding pools every ``TICK_S`` until cancelled."""
        while True:
            await asyncio.sleep(TICK_S)
            if any(self._queues.values()):
                self.release()
