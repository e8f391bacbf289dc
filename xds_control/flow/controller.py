"""The flow controller: holds a picker pool's requests while it is saturated and lets them go
one at a time as servers free up (per control-plane replica).

Its face to the picker's exchange is four calls, one per phase of a request:

- ``admit`` when the body is whole: charges the request's token budget and says ``Go``,
  ``Hold`` or ``Refuse`` (``flow.admission``);
- ``wait`` for a held request: it waits in the pool's ``FlowQueues`` until ``release``
  dispatches it (a server answered or finished one, a reading changed, or the controller's
  tick), it times out, or its queue is full; ``Go`` or ``Refuse`` (a refusal refunds the charge);
- ``answered`` when a server answered one (the next held request may go);
- ``finish`` with the response's usage (settles the charge), and ``end`` when the stream closes.

``release`` dispatches one request per pool and no other until that one has returned from
``wait`` (its caller picks at once, in the same step), then looks again (``call_soon``): the
pick's own load counts before the next is let go. Pools are read through ``Saturation``
(the picker implements it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable, Mapping

import structlog

from xds_control.config.flow import FlowControl
from xds_control.flow.admission import Admission, Go, Hold, Refuse
from xds_control.flow.budgets import Charge, TokenBudgets, estimate_tokens
from xds_control.flow.metrics import (
    FLOW_CHECK_SECONDS,
    FLOW_OUTCOMES,
    FLOW_QUEUED,
    FLOW_WAIT_SECONDS,
)
from xds_control.flow.queues import Band, FlowQueues, Held
from xds_control.flow.refused import Refused
from xds_control.flow.saturation import Saturation
from xds_control.flow.shares import TenantShares

__all__ = ["TICK_S", "FlowController"]

log = structlog.get_logger(__name__)

TICK_S = 0.05
"""How often the controller looks at the pools holding requests without being told."""

_CHECK_ADMIT, _CHECK_RELEASE, _CHECK_END = (
    FLOW_CHECK_SECONDS.labels(phase) for phase in ("admit", "release", "end")
)
"""The phase timers, bound once: a label lookup per request is a lock and a dict."""


class FlowController:
    """Flow control for the pools ``pools`` says have it."""

    def __init__(
        self,
        *,
        pools: Saturation,
        clock: Callable[[], float] = time.monotonic,
        replicas: Callable[[], int] = lambda: 1,
    ) -> None:
        """``replicas()``: the control planes sharing each token budget (``TokenBudgets``)."""
        self._pools = pools
        self._clock = clock
        self._queues: dict[str, FlowQueues] = {}
        self._waiting: dict[Held, asyncio.Future[None]] = {}
        self._in_transit: dict[str, int] = {}
        """Pool -> requests dispatched that have not yet returned from ``wait``."""
        self._tenant_shares: dict[str, TenantShares] = {}
        self.budgets = TokenBudgets(clock=clock, replicas=replicas)
        """The pools' output-token budgets (``admit`` charges, ``finish`` settles)."""

    def admit(
        self,
        *,
        pool: str,
        request: Hashable,
        headers: Mapping[str, str],
        body: bytes,
        band: Band,
    ) -> Admission:
        """Flow control's word on ``request`` to ``pool`` once its body is whole: its tenant
        and band from ``headers`` (``band``: the route's, when they name none), its estimate
        from ``body`` charged to its token budget. ``Refuse`` when it does not fit the budget,
        ``Hold`` when the pool holds requests now, else ``Go``."""
        settings = self._pools.flow_control(pool)
        if settings is None:
            return Go()
        with _CHECK_ADMIT.time():
            tenant = headers.get(settings.tenant_header, "")
            band = Band.of(headers.get(settings.priority_header, ""), default=band)
            charge = None
            if settings.budgets:
                try:
                    charge = self.budgets.charge(
                        pool=pool,
                        budgets=settings.budgets,
                        tenant=tenant,
                        band=band,
                        estimate=estimate_tokens(body, default=settings.estimate_tokens),
                    )
                except Refused as refused:
                    return Refuse(refused)
            if self.holds(pool):
                return Hold(
                    pool=pool,
                    request=request,
                    tenant=tenant,
                    band=band,
                    size=len(body),
                    wait_s=settings.wait_s(band.name.lower()),
                    charge=charge,
                )
            self.let_through(pool=pool, tenant=tenant)
            return Go(charge)

    async def wait(self, hold: Hold) -> Go | Refuse:
        """The held request's final word, once the pool lets it go (``Go``) or refuses it
        (``Refuse``: its queue is full, its wait ran out; never served, its charge is
        refunded)."""
        try:
            await self._queue_up(
                pool=hold.pool,
                band=hold.band,
                tenant=hold.tenant,
                size=hold.size,
                request=hold.request,
            )
        except Refused as refused:
            self.finish(hold.charge, tokens=0)  # never served: it generated nothing
            return Refuse(refused)
        return Go(hold.charge)

    def answered(self) -> None:
        """A server answered a request (its response's headers): the next held may go."""
        with _CHECK_RELEASE.time():
            self.release()

    def finish(self, charge: Charge | None, *, tokens: int | None) -> None:
        """Settle ``charge`` (``None``: nothing charged) with the ``tokens`` the response's
        usage reported (``None``: it did not say; the estimate stays charged)."""
        if charge is not None:
            self.budgets.settle(charge, tokens=tokens)

    def end(self, charge: Charge | None, *, tokens: int | None) -> None:
        """The request's stream closed: ``finish`` it if its usage has not, and let the next
        held request go."""
        with _CHECK_END.time():
            self.finish(charge, tokens=tokens)
            self.release()

    def holds(self, pool: str) -> bool:
        """A request for ``pool`` now would be held: the pool has flow control and either
        holds requests already (arrival order) or is saturated."""
        if self._pools.flow_control(pool) is None:
            return False
        queue = self._queues.get(pool)
        return bool(queue) or self._pools.saturated(pool)

    def queued(self, pool: str) -> int:
        """Requests ``pool`` holds now."""
        queue = self._queues.get(pool)
        return 0 if queue is None else len(queue)

    def let_through(self, *, pool: str, tenant: str) -> None:
        """A request of ``tenant`` went on at once, nothing held: it counts for the tenant's
        share as a dispatched one does."""
        self._shares(pool).served(tenant, now=self._clock())

    async def _queue_up(
        self, *, pool: str, band: Band, tenant: str, size: int, request: Hashable
    ) -> None:
        """Return once ``request`` may be picked; raise ``Refused`` if it may not."""
        settings = self._pools.flow_control(pool)
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
                if self._pools.ready(pool)
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
                if not queue or self._in_transit.get(pool, 0) or self._pools.saturated(pool):
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
