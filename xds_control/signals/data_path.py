"""Observations from the data path -> per-endpoint readings over a sliding window.

Every Envoy streams an access-log entry per request (``signals/access_log.py``); each becomes
an ``Observation`` and lands here, in its endpoint's window. ``samples`` reads the windows as
``Sample``s with the ``DATAPATH_*`` signals, so they merge with every other source's.

Requests still running count too. Envoy logs each open stream every ``PERIODIC_S``
(``Progress``); the window keeps the newest such entry per stream until the stream's own
entry ends it, and adds what the open streams have taken so far (their seconds, and the
seconds and bytes they have streamed) to the readings below. Without them, a server whose
answers take longer than the window (a slow server, overloaded) would have no reading at all
until its first one ended, and would be weighed as a typical one meanwhile; and the in-flight
count, read from requests that ended, would lag the load that runs now. An open stream not
logged for ``3 x PERIODIC_S`` (its end lost, its Envoy gone) is dropped.

Memory is bounded: an endpoint's window is a ring of ``buckets`` time slots of sums (count,
failures, TTFB, streaming seconds and bytes), whatever its request rate; an endpoint with no
request for ``window_s`` is forgotten, and at most ``max_addresses`` are tracked at once.

The readings, over the requests that finished in the last ``window_s`` seconds:

- ``DATAPATH_RATE``: requests per second; over the time since the endpoint's first request
  when that is shorter than the window. Entries reach the control plane up to Envoy's buffer
  flush interval (1 s) after the request ended, so at a steady rate it reads up to
  flush/``window_s`` low (3% at 30 s).
- ``DATAPATH_REQUESTS``: how many requests the other readings are taken over.
- ``DATAPATH_TTFB_S``: the mean time to the first response byte of requests that did not fail
  (a quick 503 says nothing about queueing or prefill).
- ``DATAPATH_STEP_S``: seconds per response byte while streaming: total (last byte - first
  byte) over total body bytes of the streamed responses that did not fail. A ratio of sums,
  not a mean of ratios: every byte weighs the same, so a two-byte answer cannot swing it. The
  bytes include the first chunk's (the log does not tell it apart): one chunk of many. For an
  SSE server that emits one event per token, it is the decode step divided by an event's
  size, which is alike between servers of one model and API.
- ``DATAPATH_INFLIGHT``: requests in flight, on average: the seconds the window's served
  requests took (start to last byte), and those the open ones have taken so far, summed, over
  the span (Little's law).
- ``DATAPATH_PROMPT_RATIO``: request body bytes per response body byte over the same streamed
  responses as the step: the prompt work behind each output byte. With the in-flight count it
  makes the data path's measure of the prefill work that stalls the steps it times.
- ``DATAPATH_ERROR_RATIO``: failed requests over all.
- ``DATAPATH_SLO_TTFT``, when the caller gives the endpoint's TTFT target: the share of its
  served requests still in the window (the last ``TTFB_KEPT``) and of its open streams whose
  first byte came within the target; an open stream still waiting past it is a miss already.

Besides the sums, each endpoint keeps the time to first byte of its last ``TTFB_KEPT``
served requests, so ``ttfb_p99`` can give the admission budgets a P99 for servers whose own
histograms nobody reads (``signals/access_log.py``, ``DataPathLatency``).

Pure: no IO and no clock; every call takes ``now``.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from xds_control.signals.observation import PERIODIC_S, Observation, Progress
from xds_control.signals.sample import Sample, Signal

__all__ = ["SOURCE", "TTFB_KEPT", "DataPathWindow", "WindowTotals"]

SOURCE = "data_path"
"""The ``Reading.source`` of every data-path reading."""

# Per-bucket sums, by index in a slot's list.
_COUNT, _FAILED, _TTFB_SUM, _TTFB_N, _STREAM_S, _STREAM_BYTES, _BUSY_S, _PROMPT_BYTES = range(8)
_FIELDS = 8


@dataclass(frozen=True, slots=True)
class WindowTotals:
    """One endpoint's sums over the window, and the span they cover (seconds)."""

    count: int
    failed: int
    ttfb_sum_s: float
    ttfb_count: int
    stream_s: float
    stream_bytes: int
    busy_s: float
    """Seconds the served requests took, start to last byte, summed."""
    prompt_bytes: int
    """Request body bytes of the streamed responses ``stream_bytes`` counts."""
    span_s: float
    last_at: float
    """When the newest of these requests ended, or an open one was last logged."""

    def values(self) -> list[tuple[Signal, float]]:
        """The readings these sums make (a signal with nothing to read is left out)."""
        out = [
            (Signal.DATAPATH_RATE, self.count / self.span_s),
            (Signal.DATAPATH_REQUESTS, float(self.count)),
        ]
        if self.count:
            out.append((Signal.DATAPATH_ERROR_RATIO, self.failed / self.count))
        if self.ttfb_count:
            out.append((Signal.DATAPATH_TTFB_S, self.ttfb_sum_s / self.ttfb_count))
        if self.busy_s:
            out.append((Signal.DATAPATH_INFLIGHT, self.busy_s / self.span_s))
        if self.stream_bytes:
            out.append((Signal.DATAPATH_STEP_S, self.stream_s / self.stream_bytes))
            out.append((Signal.DATAPATH_PROMPT_RATIO, self.prompt_bytes / self.stream_bytes))
        return out


_OPEN_KEPT_S = 3 * PERIODIC_S
"""An open stream not logged for this long is dropped: its end was lost or its Envoy went."""


@dataclass(slots=True)
class _Open:
    """The newest periodic entry of one open stream, and how many were seen."""

    progress: Progress
    seen: int
    refreshed_at: float
    """Our clock when the newest entry came."""

    @property
    def elapsed_s(self) -> float:
        """Seconds the stream has run, as of its newest entry: the n-th is written n periods
        in, whatever our clock says (the buffer holds it up to a second before it comes)."""
        return self.seen * PERIODIC_S


TTFB_KEPT = 128
"""Times to first byte kept per endpoint (1 KiB each way): a P99 over the last 128 requests in
the window rests on the two slowest."""


class _Track:
    """One endpoint's ring of buckets: ``ids[i]`` is the bucket number slot ``i`` holds; and
    its ring of the last ``TTFB_KEPT`` times to first byte with when each request ended."""

    __slots__ = ("first_at", "ids", "last_at", "open", "sums", "ttfb", "ttfb_at", "ttfb_next")

    def __init__(self, *, buckets: int, at: float) -> None:
        self.ids = [-1] * buckets
        self.sums = [[0.0] * _FIELDS for _ in range(buckets)]
        self.first_at = at
        self.last_at = at
        self.ttfb = array("d")
        self.ttfb_at = array("d")
        self.ttfb_next = 0
        self.open: dict[str, _Open] = {}

    def live(self, *, now: float) -> list[_Open]:
        """The open streams logged lately; the others are dropped."""
        stale = [k for k, o in self.open.items() if o.refreshed_at < now - _OPEN_KEPT_S]
        for key in stale:
            del self.open[key]
        return list(self.open.values())

    def ttfb_since(self, horizon: float) -> list[float]:
        """The kept times to first byte of requests that ended after ``horizon``."""
        return [v for v, at in zip(self.ttfb, self.ttfb_at, strict=True) if at > horizon]

    def keep_ttfb(self, ttfb_s: float, *, at: float) -> None:
        if len(self.ttfb) < TTFB_KEPT:
            self.ttfb.append(ttfb_s)
            self.ttfb_at.append(at)
            return
        self.ttfb[self.ttfb_next] = ttfb_s
        self.ttfb_at[self.ttfb_next] = at
        self.ttfb_next = (self.ttfb_next + 1) % TTFB_KEPT


class DataPathWindow:
    """Per-endpoint sliding windows of observations (see the module docstring)."""

    def __init__(
        self, *, window_s: float = 30.0, buckets: int = 30, max_addresses: int = 100_000
    ) -> None:
        if window_s <= 0 or buckets < 1 or max_addresses < 1:
            raise ValueError("window_s > 0, buckets >= 1 and max_addresses >= 1, please")
        self.window_s = window_s
        self._buckets = buckets
        self._bucket_s = window_s / buckets
        self._max = max_addresses
        self._tracks: dict[str, _Track] = {}
        self._pruned_at = -math.inf

    def __len__(self) -> int:
        return len(self._tracks)

    def add(self, observation: Observation, *, now: float) -> bool:
        """Count ``observation`` in its endpoint's window; ``False`` when it is not counted
        (it finished before the window, or ``max_addresses`` endpoints are tracked already).

        It is placed at its ``finished_at`` (Envoy's clock), never later than ``now`` (ours):
        a clock ahead of ours cannot put requests in the future."""
        at = min(observation.finished_at, now)
        if at <= now - self.window_s:
            return False
        if now - self._pruned_at > self.window_s:
            self.forget(now=now)  # once a window: the cost of pruning stays per window
        track = self._track(observation.address, at=at, now=now)
        if track is None:
            return False
        bucket = int(at // self._bucket_s)
        slot = bucket % self._buckets
        sums = track.sums[slot]
        if track.ids[slot] != bucket:
            if track.ids[slot] > bucket:
                return False  # older than what the slot holds now: out of the window
            track.ids[slot] = bucket
            sums[:] = [0.0] * _FIELDS
        track.open.pop(observation.stream_id, None)
        sums[_COUNT] += 1
        track.first_at = min(track.first_at, at)
        track.last_at = max(track.last_at, at)
        if observation.failed:
            sums[_FAILED] += 1
            return True
        if observation.ttfb_s is not None:
            sums[_TTFB_SUM] += observation.ttfb_s
            sums[_TTFB_N] += 1
            track.keep_ttfb(observation.ttfb_s, at=at)
        if observation.duration_s is not None:
            sums[_BUSY_S] += observation.duration_s
        stream_s = observation.stream_s
        if observation.streamed and stream_s is not None and observation.response_bytes > 0:
            sums[_STREAM_S] += stream_s
            sums[_STREAM_BYTES] += observation.response_bytes
            sums[_PROMPT_BYTES] += observation.request_bytes
        return True

    def _track(self, address: str, *, at: float, now: float) -> _Track | None:
        """``address``'s track, a new one from ``at`` if it has none; ``None`` when
        ``max_addresses`` endpoints are tracked already."""
        track = self._tracks.get(address)
        if track is None:
            if len(self._tracks) >= self._max:
                self.forget(now=now)
                if len(self._tracks) >= self._max:
                    return None
            track = self._tracks[address] = _Track(buckets=self._buckets, at=at)
        return track

    def progress(self, progress: Progress, *, now: float) -> bool:
        """Keep ``progress`` as its stream's newest; ``False`` when it is not kept
        (``max_addresses`` endpoints are tracked already, or it names no stream)."""
        if not progress.stream_id:
            return False
        new = progress.address not in self._tracks
        track = self._track(progress.address, at=min(progress.started_at, now), now=now)
        if track is None:
            return False
        if new:
            track.last_at = -math.inf  # no request of it ended yet
        kept = track.open.get(progress.stream_id)
        if kept is None:
            # Its first entry here, though maybe not its first: the window may be newer than
            # the stream. How many periods it has run by the clocks; later ones are counted.
            seen = max(1, int((now - progress.started_at) // PERIODIC_S))
            track.open[progress.stream_id] = _Open(progress=progress, seen=seen, refreshed_at=now)
        else:
            kept.progress, kept.seen, kept.refreshed_at = progress, kept.seen + 1, now
        return True

    def forget(self, *, now: float) -> None:
        """Drop every endpoint with no request in the window, ended or open."""
        self._pruned_at = now
        horizon = now - self.window_s
        for address in [
            a for a, t in self._tracks.items() if t.last_at <= horizon and not t.live(now=now)
        ]:
            del self._tracks[address]

    def totals(self, address: str, *, now: float) -> WindowTotals | None:
        """``address``'s sums over the window; ``None`` when it had no request in it."""
        track = self._tracks.get(address)
        if track is None:
            return None
        running = track.live(now=now)
        if not running and track.last_at <= now - self.window_s:
            return None
        current = int(now // self._bucket_s)
        oldest = current - self._buckets + 1
        total = [0.0] * _FIELDS
        for bucket, sums in zip(track.ids, track.sums, strict=True):
            if oldest <= bucket <= current:
                for i in range(_FIELDS):
                    total[i] += sums[i]
        if not total[_COUNT] and not running:
            return None
        window_start = oldest * self._bucket_s
        span = max(min(now - window_start, now - track.first_at), self._bucket_s)
        newest = track.last_at
        for stream in running:
            seen = stream.progress
            # In flight until now, as a request that ended was until its end; its bytes so
            # far were sent in the periods its entries count.
            total[_BUSY_S] += min(max(stream.elapsed_s, now - seen.started_at), span)
            newest = max(newest, seen.started_at + stream.elapsed_s)
            if seen.streamed and seen.ttfb_s is not None and seen.response_bytes > 0:
                total[_STREAM_S] += max(0.0, stream.elapsed_s - seen.ttfb_s)
                total[_STREAM_BYTES] += seen.response_bytes
                total[_PROMPT_BYTES] += seen.request_bytes
        return WindowTotals(
            count=int(total[_COUNT]),
            failed=int(total[_FAILED]),
            ttfb_sum_s=total[_TTFB_SUM],
            ttfb_count=int(total[_TTFB_N]),
            stream_s=total[_STREAM_S],
            stream_bytes=int(total[_STREAM_BYTES]),
            busy_s=total[_BUSY_S],
            prompt_bytes=int(total[_PROMPT_BYTES]),
            span_s=span,
            last_at=min(newest, now),
        )

    def ttfb_p99(self, *, now: float) -> dict[str, float]:
        """Each endpoint's P99 time to first byte over its served requests still in the window
        (the last ``TTFB_KEPT`` of them at most), linearly interpolated between ranks."""
        horizon = now - self.window_s
        out: dict[str, float] = {}
        for address, track in self._tracks.items():
            kept = sorted(track.ttfb_since(horizon))
            if not kept:
                continue
            rank = 0.99 * (len(kept) - 1)
            low = int(rank)
            high = min(low + 1, len(kept) - 1)
            out[address] = kept[low] + (kept[high] - kept[low]) * (rank - low)
        return out

    def ttft_met(self, address: str, *, target_s: float, now: float) -> float | None:
        """The share of ``address``'s requests whose first byte came within ``target_s``
        (``DATAPATH_SLO_TTFT``); ``None`` when none can be judged yet."""
        track = self._tracks.get(address)
        if track is None:
            return None
        ended = track.ttfb_since(now - self.window_s)
        judged = len(ended)
        met = sum(value <= target_s for value in ended)
        for stream in track.live(now=now):
            first = stream.progress.ttfb_s
            if first is not None:
                judged += 1
                met += first <= target_s
            elif stream.elapsed_s > target_s:
                judged += 1  # still waiting, and past the target already
        return met / judged if judged else None

    def samples(
        self,
        addresses: Collection[str] | None = None,
        *,
        now: float,
        ttft_targets: Mapping[str, float] | None = None,
    ) -> dict[str, Sample]:
        """A sample for each of ``addresses`` (default: every one tracked) with a request in
        the window or running, its readings observed at its newest request's end or open
        stream's entry; with ``DATAPATH_SLO_TTFT`` for those ``ttft_targets`` (address ->
        its pool's TTFT target) names."""
        wanted = self._tracks.keys() if addresses is None else addresses
        targets = ttft_targets or {}
        out: dict[str, Sample] = {}
        for address in wanted:
            totals = self.totals(address, now=now)
            if totals is None:
                continue
            values = totals.values()
            target = targets.get(address)
            met = None if target is None else self.ttft_met(address, target_s=target, now=now)
            if met is not None:
                values.append((Signal.DATAPATH_SLO_TTFT, met))
            out[address] = Sample.build(
                address=address, values=values, observed_at=totals.last_at, source=SOURCE
            )
        return out
