"""The KV-event source: one subscriber for every server of every pool with ``kv_events``,
kept in step with the config and discovery, and what ``/v1/status`` shows of them.

``KvEvents.sync`` is called with the config and the discovered endpoints after every discovery
pass: servers that appeared get a subscriber (a named, guarded task), servers that left or whose
ports changed lose theirs (the sink hears ``AllCleared`` for a server no longer subscribed).
Every subscriber hands its events to the one ``KvSink`` given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
import zmq.asyncio

from xds_control.config import Config, KvEventPorts, KvEventsConfig, Pool
from xds_control.signals.kv_subscriber import KvEndpoint, KvSink, KvStatus, KvSubscriber
from xds_control.signals.kv_wire import AllCleared, BlockHash, BlocksRemoved, BlocksStored, KvEvent
from xds_control.tasks import guarded_task

__all__ = ["BlockCounts", "KvEvents", "KvServer", "is_stale", "kv_endpoints"]

log = structlog.get_logger(__name__)


class KvServer(Protocol):
    """A discovered endpoint as the KV-event source sees it (``discovery.Endpoint``)."""

    @property
    def address(self) -> str:
        """``IP:PORT``: the server's identity."""
        ...

    @property
    def host(self) -> str:
        """Its IP."""
        ...

    @property
    def kv_events(self) -> KvEventPorts | None:
        """Its own event ports; ``None``: its pool's."""
        ...


def _tcp(host: str, port: int) -> str:
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def kv_endpoints(pool: Pool, servers: Iterable[KvServer]) -> tuple[KvEndpoint, ...]:
    """Where each of ``pool``'s servers publishes (none when the pool has no ``kv_events``).
    Pure."""
    config = pool.kv_events
    if config is None:
        return ()
    out = []
    for server in servers:
        own = server.kv_events
        port = own.port if own is not None else config.port
        replay = own.replay_port if own is not None and own.replay_port else config.replay_port
        out.append(
            KvEndpoint(
                server=server.address,
                events=_tcp(server.host, port),
                replay=None if replay is None else _tcp(server.host, replay),
                topic=config.topic,
            )
        )
    return tuple(out)


def is_stale(status: KvStatus, *, healthy: bool, busy: bool, stale_after_s: float) -> bool:
    """Whether a server's events have stopped: it is healthy and running requests (so it would
    publish), yet nothing came for ``stale_after_s`` (or ever, once subscribed that long).
    Silence from an idle or unhealthy server says nothing: the protocol has no heartbeat."""
    age = status.last_event_age_s if status.last_event_age_s is not None else status.subscribed_s
    return healthy and busy and age > stale_after_s


class BlockCounts:
    """A ``KvSink`` that keeps, per server, the blocks its events say it holds (hashes only):
    what ``/v1/status`` reports next to each subscription."""

    def __init__(self) -> None:
        self._held: dict[str, set[BlockHash]] = {}

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        """Follow ``server``'s events."""
        held = self._held.setdefault(server, set())
        for event in events:
            if isinstance(event, BlocksStored):
                held.update(event.block_hashes)
            elif isinstance(event, BlocksRemoved):
                held.difference_update(event.block_hashes)
            elif isinstance(event, AllCleared):
                held.clear()

    def held(self, server: str) -> int:
        """Blocks ``server`` holds as far as its events tell."""
        return len(self._held.get(server, ()))

    def forget(self, server: str) -> None:
        """``server`` is no longer subscribed to."""
        self._held.pop(server, None)


class _Fanout:
    def __init__(self, sinks: Sequence[KvSink]) -> None:
        self.sinks = sinks

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        for sink in self.sinks:
            sink.apply(server, events)


@dataclass(slots=True)
class _Running:
    subscriber: KvSubscriber
    task: Any
    pool: str
    settings: KvEventsConfig


class KvEvents:
    """Every subscription; ``sink`` receives every server's events (``BlockCounts`` always
    does too, for the status)."""

    def __init__(
        self, *, sink: KvSink | None = None, context: zmq.asyncio.Context | None = None
    ) -> None:
        self.counts = BlockCounts()
        self._sink = _Fanout([self.counts] if sink is None else [self.counts, sink])
        self._context = context
        self._running: dict[KvEndpoint, _Running] = {}
        self._down: set[str] = set()
        """Subscribed servers last seen UNHEALTHY."""

    def sync(self, config: Config, endpoints: Mapping[str, Sequence[KvServer]]) -> None:
        """Subscribe to exactly the servers ``config`` and ``endpoints`` name; must run on the
        event loop (it starts and cancels tasks)."""
        wanted: dict[KvEndpoint, tuple[str, KvEventsConfig]] = {}
        for pool in config.pools:
            if pool.kv_events is None:
                continue
            for endpoint in kv_endpoints(pool, endpoints.get(pool.name, ())):
                wanted[endpoint] = (pool.name, pool.kv_events)
        for endpoint in list(self._running):
            if endpoint not in wanted:
                gone = self._running.pop(endpoint)
                gone.task.cancel()
                if all(e.server != endpoint.server for e in self._running):
                    # Nothing it held is known any more: the sink hears it as cleared.
                    self._sink.apply(endpoint.server, [AllCleared()])
                    self.counts.forget(endpoint.server)
        for endpoint, (pool_name, settings) in wanted.items():
            running = self._running.get(endpoint)
            if running is not None:
                running.pool, running.settings = pool_name, settings
                continue
            subscriber = KvSubscriber(
                endpoint=endpoint,
                sink=self._sink,
                replay_timeout_s=settings.replay_timeout_s,
                context=self._context,
            )
            task = guarded_task(subscriber.run_forever(), name=f"kv-events-{endpoint.server}")
            self._running[endpoint] = _Running(subscriber, task, pool_name, settings)

    def observe_health(self, healthy: Mapping[str, bool]) -> None:
        """What the engine last read of each server: address -> healthy (``True``) or
        unhealthy (``False``); a server left out (draining, not read) keeps its last. A
        subscribed server seen unhealthy and then healthy again is taken as restarted
        (``KvSubscriber.restarted``: its blocks cleared at once): the protocol has no heartbeat,
        and a restarted process already past the old sequence number cannot be told by its
        numbers. A flap that was no restart costs that server's credit until its next events."""
        for endpoint, running in self._running.items():
            server = endpoint.server
            now = healthy.get(server)
            if now is False:
                self._down.add(server)
            elif now is True and server in self._down:
                self._down.discard(server)
                log.info("kv events: server back healthy, taken as restarted", server=server)
                running.subscriber.restarted()
        self._down.intersection_update(e.server for e in self._running)

    def subscription(self, server: str) -> tuple[KvEventsConfig, KvStatus] | None:
        """The settings and status of ``server``'s subscription (by its address), if any."""
        for endpoint, running in self._running.items():
            if endpoint.server == server:
                return running.settings, running.subscriber.status()
        return None

    def statuses(self) -> list[tuple[str, KvEventsConfig, KvStatus, int]]:
        """Per subscription: its pool, its settings, its status and the blocks it holds."""
        return [
            (r.pool, r.settings, r.subscriber.status(), self.counts.held(e.server))
            for e, r in self._running.items()
        ]

    async def close(self) -> None:
        """Cancel every subscription and wait for their sockets to close."""
        tasks = [r.task for r in self._running.values()]
        self._running.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
