"""The fast path: scrape each endpoint's own /metrics directly, sub-second if need be.

One failing endpoint only marks that endpoint (``Sample.scrape_failures``, which feeds
health); the others are unaffected. Rates (decode step, prefix hits, TTFT SLO, errors) come
from the oldest snapshot kept within ``config.scrape.window_s``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

import aiohttp
import structlog

from xds_control.config import Engine, SignalsConfig
from xds_control.errors import QueryError
from xds_control.signals.exposition import Snapshot, derive, parse_exposition
from xds_control.signals.http import Answer, request
from xds_control.signals.metrics import REJECTED_VALUES, SCRAPES
from xds_control.signals.sample import Sample, Signal
from xds_control.signals.source import Target

__all__ = ["ScrapeSource"]

log = structlog.get_logger(__name__)

SOURCE = "scrape"


@dataclass(slots=True)
class _History:
    snapshots: deque[tuple[float, Snapshot]] = field(default_factory=deque)
    failures: int = 0
    restarted_at: float | None = None


class ScrapeSource:
    """``SignalSource`` scraping ``http://<address><path>`` of every target concurrently.

    ``fetch`` scrapes now and returns one sample per target (an endpoint that failed gets a
    sample with no readings and its consecutive ``scrape_failures``). It raises nothing for
    failing endpoints; call it every ``config.scrape.interval_s`` from a task of its own and
    read ``latest()`` from the reconcile loop, or call ``fetch`` from the loop directly.
    ``client`` is an ``aiohttp.ClientSession`` the caller owns; ``clock`` gives Unix seconds.
    """

    def __init__(
        self,
        *,
        client: aiohttp.ClientSession,
        config: SignalsConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._scrape = config.scrape
        self._clock = clock
        self._history: dict[str, _History] = {}
        self._latest: dict[str, Sample] = {}
        self._gate = asyncio.Semaphore(config.scrape.concurrency)

    def latest(self) -> Mapping[str, Sample]:
        """The samples of the last completed ``fetch``."""
        return self._latest

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        """Scrape every target now; never raises for a failing endpoint."""
        wanted = {t.address for t in targets}
        for gone in self._history.keys() - wanted:
            del self._history[gone]
        samples = await asyncio.gather(*(self._one(t) for t in targets))
        self._latest = {s.address: s for s in samples}
        return self._latest

    async def _one(self, target: Target) -> Sample:
        history = self._history.setdefault(target.address, _History())
        url = f"http://{target.address}{self._scrape.path}"
        try:
            # The timeout starts once a slot is free (queueing for a slot is not the server's
            # fault).
            async with self._gate:
                answer = await request(self._client, url=url, timeout_s=self._scrape.timeout_s)
            observed_at = self._clock()
            snapshot = _parse(answer, engine=target.engine)
        except QueryError as exc:
            return self._failed(target, history, exc.outcome, str(exc))
        SCRAPES.labels("ok").inc()
        history.failures = 0
        return self._sample(target, history, snapshot, observed_at)

    def _sample(
        self, target: Target, history: _History, snapshot: Snapshot, observed_at: float
    ) -> Sample:
        values: dict[Signal, float] = dict(snapshot.gauges)
        snapshots = history.snapshots
        while len(snapshots) > 1 and snapshots[1][0] <= observed_at - self._scrape.window_s:
            snapshots.popleft()
        if snapshots:
            derived = derive(old=snapshots[0][1], new=snapshot, ttft_slo_s=target.ttft_slo_s)
            if derived is None:
                # A counter went backwards: the server restarted. Start the window afresh
                # and report the restart as a start time, which triggers warm-up.
                snapshots.clear()
                history.restarted_at = observed_at
            else:
                values.update(derived)
        snapshots.append((observed_at, snapshot))
        running = [s.gauges[Signal.RUNNING] for _, s in snapshots if Signal.RUNNING in s.gauges]
        if running:
            # The batch over the same window as the rates (a step's stall grows with it).
            values[Signal.RUNNING_MEAN] = sum(running) / len(running)
        if Signal.STARTED_AT not in values and history.restarted_at is not None:
            values[Signal.STARTED_AT] = history.restarted_at
        adapters = snapshot.adapters
        sample = Sample.build(
            address=target.address,
            values=values.items(),
            observed_at=observed_at,
            source=SOURCE,
            # The series' own time is the server's clock; the scrape's is the engine's.
            adapters=None
            if adapters is None
            else dataclasses.replace(adapters, observed_at=observed_at),
        )
        for signal in sample.rejected:
            REJECTED_VALUES.labels(SOURCE, signal.value).inc()
        return sample

    def _failed(self, target: Target, history: _History, outcome: str, detail: str) -> Sample:
        SCRAPES.labels(outcome).inc()
        history.failures += 1
        log.info(
            "scrape failed",
            address=target.address,
            outcome=outcome,
            detail=detail,
            consecutive=history.failures,
        )
        return Sample(address=target.address, scrape_failures=history.failures)


def _parse(answer: Answer, *, engine: Engine) -> Snapshot:
    """The exposition in ``answer``; ``QueryError`` (garbage) for text that is not one."""
    try:
        return parse_exposition(answer.body.decode(answer.encoding), engine=engine)
    except (ValueError, UnicodeDecodeError) as exc:
        raise QueryError("garbage", str(exc)) from exc
