"""One server's KV-cache events, subscribed: ZMQ SUB on its event socket, DEALER on its replay
socket, each batch decoded and handed on in sequence order.

The loop never dies of what a server sends: a payload in no known layout is refused (logged
once per server until a batch decodes again, counted always) and skipped; a sink that raises is
logged and the loop goes on. ZMQ reconnects by itself, so a server that is down or restarting
costs nothing but silence; its restart shows as sequence numbers starting again
(``kv_sequence.Tracker``), which the sink receives as ``AllCleared``.

The replay protocol is vLLM's: send the first wanted sequence number (8 bytes, big-endian) to
the ROUTER; it answers ``(seq, payload)`` for every batch it still holds from there on, then
``(-1, b"")``. A replay silent for ``replay_timeout_s`` counts as ended. A hole in what a replay
brought (the ROUTER drops past its high-water mark when this reader falls behind) is asked for
again; what the server's buffer no longer holds is lost, and the server's blocks are cleared.

On start the subscriber asks the replay socket for everything from 0: a control plane that
starts (or a second replica) learns what the server already holds, as far as the server's
replay buffer reaches. Run again after a cut-off, it asks from where it stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog
import zmq
import zmq.asyncio

from xds_control.errors import KvLayoutError
from xds_control.signals.kv_sequence import Step, Tracker
from xds_control.signals.kv_wire import AllCleared, KvEvent, Layout, decode_batch
from xds_control.signals.metrics import KV_BATCHES

__all__ = ["KvEndpoint", "KvSink", "KvStatus", "KvSubscriber"]

log = structlog.get_logger(__name__)

_END = -1
_REPLAY_ROUNDS = 64
"""Requests for one replay at most. Each round brings at least the ROUTER's high-water mark in
order (1,000 batches as vLLM leaves it: 10 rounds for its whole 10,000-batch buffer); a round
that brings nothing new ends the replay sooner."""


@dataclass(frozen=True, slots=True)
class KvEndpoint:
    """Where one server publishes: ``events`` (``tcp://host:port`` of its PUB socket) and
    ``replay`` (its ROUTER; ``None``: no replay, a gap is a loss)."""

    server: str
    """The server's identity downstream (its ``IP:PORT``)."""
    events: str
    replay: str | None
    topic: str = ""


class KvSink(Protocol):
    """Where decoded events go, in each server's sequence order.

    ``apply`` is called from the event loop and must not block; an exception is logged and
    the events it was given are taken as applied (the subscriber goes on with the next)."""

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        """``events`` happened on ``server``, in this order."""
        ...


@dataclass(frozen=True, slots=True)
class KvStatus:
    """What ``/v1/status`` shows of one server's events."""

    server: str
    events: str
    last_seq: int
    """The last sequence number applied; -1: none yet."""
    last_event_age_s: float | None
    """Seconds since the last batch arrived; ``None``: none yet."""
    subscribed_s: float
    """Seconds since the subscription started (0 before)."""
    layout: Layout | None
    """The layout of the last batch decoded."""
    batches: int
    refused: int
    """Batches in no known layout (skipped)."""
    restarts: int
    lost: int
    """Batches known lost (gaps the replay did not fill)."""


class KvSubscriber:
    """The subscription of one ``KvEndpoint``; ``run`` until cancelled.

    ``replay_timeout_s`` is how long a replay may take to answer, ``replay_pause_s`` the
    silence between answers that ends it when its end marker was dropped; ``clock`` gives
    monotonic seconds (for ages only); ``context`` is the ZMQ context to make
    sockets with (one per process is enough; the default is pyzmq's shared instance)."""

    def __init__(
        self,
        *,
        endpoint: KvEndpoint,
        sink: KvSink,
        replay_timeout_s: float = 2.0,
        replay_pause_s: float = 0.5,
        context: zmq.asyncio.Context | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self._sink = sink
        self._replay_timeout_s = replay_timeout_s
        self._replay_pause_s = min(replay_timeout_s, replay_pause_s)
        self._context = context or zmq.asyncio.Context.instance()
        self._clock = clock
        self._tracker = Tracker()
        self._log = log.bind(server=endpoint.server, kv_events=endpoint.events)
        self._last_at: float | None = None
        self._started_at: float | None = None
        self._layout: Layout | None = None
        self._batches = 0
        self._refused = 0
        self._refusing = False

    def status(self) -> KvStatus:
        """This server's numbers now."""
        t = self._tracker
        now = self._clock()
        age = None if self._last_at is None else max(0.0, now - self._last_at)
        subscribed = 0.0 if self._started_at is None else max(0.0, now - self._started_at)
        return KvStatus(
            server=self.endpoint.server,
            events=self.endpoint.events,
            last_seq=t.last,
            last_event_age_s=age,
            subscribed_s=subscribed,
            layout=self._layout,
            batches=self._batches,
            refused=self._refused,
            restarts=t.restarts,
            lost=t.lost,
        )

    def restarted(self) -> None:
        """Told from outside (health went down and up) that the server restarted: its blocks
        are cleared now, not at its next batch (a restarted server may stay idle), and its
        sequence numbers start again."""
        self._tracker.restart()
        self._tracker.cleared = False
        self._sink.apply(self.endpoint.server, [AllCleared()])

    async def run_forever(self, *, backoff_s: float = 1.0, max_backoff_s: float = 30.0) -> None:
        """``run``, and again after anything it raises (logged; a socket error, an address ZMQ
        refuses), waiting longer each time up to ``max_backoff_s``: one server's trouble never
        ends its subscription for good."""
        wait = backoff_s
        while True:
            batches = self._batches
            try:
                await self.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                if self._batches != batches:
                    wait = backoff_s  # it worked for a while: start the backoff afresh
                self._log.exception("KV event subscription failed; retrying", retry_in_s=wait)
            await asyncio.sleep(wait)
            wait = min(max_backoff_s, wait * 2)

    async def run(self) -> None:
        """Subscribe and apply until cancelled; the sockets are closed on the way out."""
        if self._started_at is None:
            self._started_at = self._clock()
        sub = self._context.socket(zmq.SUB)
        replay: zmq.asyncio.Socket | None = None
        try:
            sub.setsockopt(zmq.LINGER, 0)
            sub.setsockopt(zmq.SUBSCRIBE, self.endpoint.topic.encode())
            sub.connect(self.endpoint.events)
            if self.endpoint.replay is not None:
                replay = self._context.socket(zmq.DEALER)
                replay.setsockopt(zmq.LINGER, 0)
                # A request is never queued for a server not connected: its answer would
                # arrive in the middle of a later replay.
                replay.setsockopt(zmq.IMMEDIATE, 1)
                # A replay answers up to the server's whole buffer (10,000 batches) at once.
                replay.setsockopt(zmq.RCVHWM, 0)
                replay.connect(self.endpoint.replay)
            self._log.info("subscribed to KV events", replay=self.endpoint.replay)
            if replay is not None:
                # From 0 the first time; after a cut-off (``run`` again), from where it stopped.
                await self._replay(replay, start=self._tracker.last + 1)
            while True:
                frames = await sub.recv_multipart()
                await self._live(frames, replay)
        finally:
            sub.close()
            if replay is not None:
                replay.close()

    async def _live(self, frames: list[bytes], replay: zmq.asyncio.Socket | None) -> None:
        if len(frames) != 3 or len(frames[1]) != 8:
            self._refuse(f"a message of {len(frames)} frames, not (topic, seq, payload)")
            return
        seq = int.from_bytes(frames[1], "big", signed=True)
        step = self._tracker.live(seq, frames[2])
        if step is Step.APPLY:
            self._apply(frames[2])
            return
        start = self._tracker.replay_from
        if start is not None:
            self._log.info("KV event gap, replaying", start=start, seq=seq)
            if replay is None:
                self._finish_replay()
            else:
                await self._replay(replay, start=start)

    async def _replay(self, replay: zmq.asyncio.Socket, *, start: int) -> None:
        """Ask for everything from ``start`` and apply it, then what was held meanwhile.

        The server's ROUTER drops what exceeds its send high-water mark (1,000 by default, as
        vLLM leaves it) when this reader falls behind, so a long replay can come back with
        holes past its first answer. The buffer itself has none, so a hole is asked for
        again, from where it starts, until a round fills everything or brings nothing new;
        only numbers older than the buffer's oldest are lost."""
        self._tracker.replay_from = start
        for round_ in range(_REPLAY_ROUNDS):
            answers, ended = await self._replay_round(replay, start=start)
            again = self._apply_replayed(
                answers, ended=ended, last_round=round_ == _REPLAY_ROUNDS - 1
            )
            if again is None:
                break
            self._log.info("KV event replay came back with a hole; asking again", start=again)
            start = again
        self._finish_replay()

    async def _replay_round(
        self, replay: zmq.asyncio.Socket, *, start: int
    ) -> tuple[dict[int, bytes], bool]:
        """One request from ``start`` and its answers by number, and whether its end marker
        came; it ends at that marker, at no
        answer in ``replay_timeout_s`` or a pause between answers. Answers of an earlier round
        arriving late are the same batches (a buffer holds one payload per number), so they
        are as good as this round's."""
        while await replay.poll(timeout=0):
            await replay.recv_multipart()  # the rest of an earlier replay that timed out
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._replay_timeout_s
        request = [b"", start.to_bytes(8, "big", signed=True)]
        answers: dict[int, bytes] = {}
        while True:
            try:
                await replay.send_multipart(request, flags=zmq.NOBLOCK)
                break
            except zmq.Again:  # not connected (yet): the server is down, or just dialled
                if loop.time() > deadline:
                    self._log.info("KV event replay not reachable", start=start)
                    return answers, False
                await asyncio.sleep(0.05)
        while (left := deadline - loop.time()) > 0:
            if not await replay.poll(timeout=int(left * 1000) + 1):
                break
            frames = await replay.recv_multipart()
            # Silence, not length, ends it: a server answers in one burst, so once answers
            # flow a short pause is its end (or its end marker was dropped too).
            deadline = loop.time() + self._replay_pause_s
            if frames and frames[0] == b"":
                frames = frames[1:]  # the DEALER keeps the REQ-style empty delimiter
            if len(frames) == 3:
                frames = frames[1:]  # vLLM 0.32 sends the topic first (its end marker: empty)
            if len(frames) != 2 or len(frames[0]) != 8:
                self._refuse(
                    f"a replay answer of {len(frames)} frames, not ([topic,] seq, payload)"
                )
                continue
            seq = int.from_bytes(frames[0], "big", signed=True)
            if seq == _END:
                return answers, True
            answers[seq] = frames[1]
        if not answers:
            self._log.warning("KV event replay did not answer in time", start=start)
        return answers, False

    def _apply_replayed(
        self, answers: dict[int, bytes], *, ended: bool, last_round: bool
    ) -> int | None:
        """Apply one round's answers in order and return the number to ask from again: where
        a hole past the first new answer starts, or what follows the last one when the end
        marker was dropped too or the live messages held meanwhile start further on.
        ``None``: the replay is done, brought nothing new, or this was the ``last_round``."""
        applied = False
        for seq in sorted(answers):
            if seq <= self._tracker.last:
                continue
            if applied and seq > self._tracker.last + 1 and not last_round:
                return self._tracker.last + 1
            if self._tracker.replayed(seq) is Step.APPLY:
                self._apply(answers[seq])
                applied = True
        if not applied or last_round:
            return None
        held = [seq for seq, _ in self._tracker.held]
        if not ended or (held and min(held) > self._tracker.last + 1):
            # No end marker (dropped with the answers before it), or one that came after a
            # tail was dropped: the live stream, held meanwhile, shows how far the buffer goes.
            return self._tracker.last + 1
        return None

    def _finish_replay(self) -> None:
        for _, payload in self._tracker.replay_ended():
            self._apply(payload)

    def _apply(self, payload: bytes) -> None:
        events: list[KvEvent] = []
        if self._tracker.cleared:
            self._tracker.cleared = False
            events.append(AllCleared())
        try:
            batch = decode_batch(payload)
        except KvLayoutError as exc:
            self._refuse(str(exc))
        else:
            self._refusing = False
            self._batches += 1
            self._layout = batch.layout
            self._last_at = self._clock()
            KV_BATCHES.labels(outcome="applied").inc()
            events.extend(batch.events)
        if not events:
            return
        try:
            self._sink.apply(self.endpoint.server, events)
        except Exception:  # the sink's bug must not end the subscription
            self._log.exception("KV event sink failed")

    def _refuse(self, reason: str) -> None:
        self._refused += 1
        KV_BATCHES.labels(outcome="refused").inc()
        if not self._refusing:
            self._refusing = True
            self._log.warning(
                "KV events refused: a layout this build does not decode (docs/kv-events.md "
                "names those it does); skipping them until one decodes",
                reason=reason,
            )
