"""Feeds the event ring and the push-to-ACK histogram from what the server and loop expose.

What happens on streams (connects, pushes, ACKs, NACKs, disconnects) comes from the stream
registry as it happens (the recorder is a ``StreamListener``): a thousand idle streams cost
nothing. The loop's state (publishes, reloads, errors) is compared with what was seen
``period`` seconds before: a few fields, whatever the fleet's size, and the loop stays free of
admin hooks; such an event is at most one period late.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from xds_control.admin.events import EventLog
from xds_control.admin.protocol import LoopStatus, Snapshots, Streams
from xds_control.server import TypeState, XdsStream
from xds_control.server.metrics import PUSH_ACK_SECONDS
from xds_control.xds import type_urls as urls

__all__ = ["Recorder"]


def _node_id(stream: XdsStream) -> str:
    return stream.node.id if stream.node is not None else ""


def _short(state: TypeState) -> str:
    return urls.SHORT_NAMES.get(state.type_url, "other")


class Recorder:
    """Listens to the registry and watches the loop state; writes what happened into
    ``events``."""

    def __init__(
        self,
        *,
        events: EventLog,
        state: LoopStatus,
        cache: Snapshots,
        registry: Streams,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.events = events
        self._state = state
        self._cache = cache
        self._registry = registry
        self._clock = clock
        self._version = state.version
        self._config_error = state.config_error
        self._errors = dict(state.errors)
        registry.add_listener(self)

    def connected(self, stream: XdsStream) -> None:
        """A stream named its node: a connect event with its protocol and peer."""
        peer = self._registry.origin(stream.stream_id).peer
        self.events.add("connect", node_id=_node_id(stream), message=f"{stream.variant} {peer}")

    def disconnected(self, stream: XdsStream) -> None:
        """A stream that had named its node ended."""
        self.events.add("disconnect", node_id=_node_id(stream))

    def pushed(self, stream: XdsStream, state: TypeState) -> None:
        """A new version of a type goes to an Envoy."""
        self.events.add(
            "push", node_id=_node_id(stream), type=_short(state), version=state.sent_version
        )

    def nacked(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy rejected a response: its words go with the event."""
        self.events.add(
            "nack",
            node_id=_node_id(stream),
            type=_short(state),
            version=state.nacked_version or "",
            message=state.last_error or "",
        )

    def acked(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy accepted a response: an event, and its latency if it is what is served."""
        short = _short(state)
        self.events.add("ack", node_id=_node_id(stream), type=short, version=state.acked_version)
        snapshot = self._cache.snapshot(stream.group)
        if snapshot is None or snapshot.resource_set(state.type_url).version != (
            state.acked_version
        ):
            return
        start = max(self._state.published_at, self._registry.origin(stream.stream_id).connected_at)
        if start > 0:
            PUSH_ACK_SECONDS.labels(type=short).observe(max(0.0, self._clock() - start))

    def poll(self) -> None:
        """Compare the loop's state with the last look; record what changed."""
        state = self._state
        if state.version and state.version != self._version:
            self.events.add("publish", version=state.version)
            self._version = state.version
        if state.config_error != self._config_error:
            if state.config_error:
                self.events.add("reload", message=f"rejected: {state.config_error}")
            else:
                self.events.add("reload", message="ok")
            self._config_error = state.config_error
        for phase, message in state.errors.items():
            if self._errors.get(phase) != message:
                self.events.add("error", message=f"{phase}: {message}")
        self._errors = dict(state.errors)

    async def run(self, *, period: float = 0.2) -> None:
        """Look at the loop's state forever."""
        while True:
            self.poll()
            await asyncio.sleep(period)
