"""Feeds the event ring and the push-to-ACK histogram from what the server and loop expose.

ACKs come through the registry's ACK listener, as they happen. Everything else (connects,
pushes, NACKs, publishes, reloads, errors) is read by comparing the stream registry and the
loop's state with what was seen ``period`` seconds before: the server and the loop stay free of
admin hooks, and an event is at most one period late.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from xds_control.admin.events import EventLog
from xds_control.cache import SnapshotCache
from xds_control.control import LoopState
from xds_control.server import StreamRegistry, TypeState, XdsStream
from xds_control.server.metrics import PUSH_ACK_SECONDS
from xds_control.xds import type_urls as urls

__all__ = ["Recorder"]

_Key = tuple[int, str]


class Recorder:
    """Watches the registry and the loop state; writes what changed into ``events``."""

    def __init__(
        self,
        *,
        events: EventLog,
        state: LoopState,
        cache: SnapshotCache,
        registry: StreamRegistry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.events = events
        self._state = state
        self._cache = cache
        self._registry = registry
        self._clock = clock
        self._streams: dict[int, str] = {}
        self._sent: dict[_Key, str] = {}
        self._nacks: dict[_Key, int] = {}
        self._version = state.version
        self._config_error = state.config_error
        self._errors = dict(state.errors)
        registry.add_ack_listener(self.on_ack)

    def on_ack(self, stream: XdsStream, state: TypeState) -> None:
        """An Envoy accepted a response: an event, and its latency if it is what is served."""
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        node_id = stream.node.id if stream.node is not None else ""
        self.events.add("ack", node_id=node_id, type=short, version=state.acked_version)
        snapshot = self._cache.snapshot(stream.group)
        if snapshot is None or snapshot.resource_set(state.type_url).version != (
            state.acked_version
        ):
            return
        start = max(self._state.published_at, self._registry.origin(stream.stream_id).connected_at)
        if start > 0:
            PUSH_ACK_SECONDS.labels(type=short).observe(max(0.0, self._clock() - start))

    def poll(self) -> None:
        """Compare with the last look; record what changed."""
        self._poll_streams()
        self._poll_state()

    async def run(self, *, period: float = 0.2) -> None:
        """Poll forever."""
        while True:
            self.poll()
            await asyncio.sleep(period)

    def _poll_streams(self) -> None:
        open_now: dict[int, str] = {}
        for stream in self._registry.streams():
            node_id = stream.node.id if stream.node is not None else ""
            if not node_id:
                continue  # no request yet: it says who it is with its first
            open_now[stream.stream_id] = node_id
            if stream.stream_id not in self._streams:
                peer = self._registry.origin(stream.stream_id).peer
                self.events.add("connect", node_id=node_id, message=f"{stream.variant} {peer}")
            for state in stream.types.values():
                self._poll_type(stream.stream_id, node_id, state)
        for stream_id, node_id in self._streams.items():
            if stream_id not in open_now:
                self.events.add("disconnect", node_id=node_id)
                self._sent = {k: v for k, v in self._sent.items() if k[0] != stream_id}
                self._nacks = {k: v for k, v in self._nacks.items() if k[0] != stream_id}
        self._streams = open_now

    def _poll_type(self, stream_id: int, node_id: str, state: TypeState) -> None:
        key = (stream_id, state.type_url)
        short = urls.SHORT_NAMES.get(state.type_url, "other")
        if state.sent_version and self._sent.get(key) != state.sent_version:
            self._sent[key] = state.sent_version
            self.events.add("push", node_id=node_id, type=short, version=state.sent_version)
        if state.nacks > self._nacks.get(key, 0):
            self.events.add(
                "nack",
                node_id=node_id,
                type=short,
                version=state.nacked_version or "",
                message=state.last_error or "",
            )
        self._nacks[key] = state.nacks

    def _poll_state(self) -> None:
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
