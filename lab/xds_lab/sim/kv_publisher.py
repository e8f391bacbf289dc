"""A simulated server's KV-event publisher, as vLLM's ``ZmqEventPublisher`` behaves on the wire.

A PUB socket sends each engine step's events as ``(topic, 8-byte big-endian sequence number,
payload)``; the last ``buffer_steps`` payloads are kept, and a ROUTER socket answers a replay
request (the first wanted sequence number, 8 bytes) with ``(seq, payload)`` for each kept
batch from there, then ``(-1, b"")``. Sequence numbers start at 0 and start again when the
server restarts (its buffer goes too), as a new vLLM process's would.

``drop(n)`` makes the next ``n`` batches miss the PUB socket (they are still kept for replay):
what a subscriber that fell behind the PUB socket's high-water mark loses.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import structlog
import zmq
import zmq.asyncio
from pydantic import BaseModel, ConfigDict, Field

from xds_control.tasks import guarded_task
from xds_lab.sim.kv_layouts import Layout, SimKvEvent, encode_batch

__all__ = ["KvEventsSpec", "KvPublisher", "layout_for"]

_END = (-1).to_bytes(8, "big", signed=True)


class KvEventsSpec(BaseModel):
    """A server's KV-event publisher (off unless given)."""

    model_config = ConfigDict(extra="forbid")

    port: int = Field(0, ge=0, le=65535, description="PUB socket; 0 lets the OS choose.")
    replay_port: int | None = Field(
        0, ge=0, le=65535, description="ROUTER replay socket; 0 lets the OS choose, null: none."
    )
    layout: Layout | None = Field(
        None,
        description="The engine release whose layout to publish (a vLLM server: one of "
        "vLLM's; an SGLang server: `sglang`); unset: the engine's own newest.",
    )
    hashes: str = Field(
        "int",
        pattern="^(int|bytes)$",
        description="Block hashes as vLLM's int (low 64 bits) or bytes (the digest).",
    )
    topic: str = Field("", description="vLLM's default topic is empty.")
    replay_topic: bool = Field(
        False,
        description="Replay answers carry the topic frame before the sequence number, as "
        "vLLM 0.32's ROUTER sends them (``topic, seq, payload``; its end marker an empty "
        "topic); off: ``seq, payload``, as the releases this simulator was first written from.",
    )
    buffer_steps: int = Field(10_000, ge=1, description="Batches kept for replay.")
    replay_sndhwm: int = Field(
        1_000,
        ge=0,
        description="The ROUTER's send high-water mark: answers past it are dropped while the "
        "reader lags. vLLM leaves ZMQ's default (1,000); a test lowers it to make a slow "
        "reader's holes happen on an idle machine too.",
    )


class KvPublisher:
    """The sockets of one server; ``start`` binds them on ``host``."""

    def __init__(
        self, *, name: str, host: str, spec: KvEventsSpec, block_size: int, engine: str = "vllm"
    ) -> None:
        """``engine`` is the server's (``Profile.engine``): only vLLM and SGLang publish these
        events, each in its own layouts (``ValueError`` otherwise)."""
        self.name = name
        self.host = host
        self.spec = spec
        self.layout = layout_for(engine, spec.layout, hashes=spec.hashes)
        self.block_size = block_size
        self.port = spec.port
        self.replay_port = spec.replay_port
        self.seq = 0
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=spec.buffer_steps)
        self._drop = 0
        self._cut_until = 0.0
        self.replays = 0
        """Replay requests answered (each a read of the buffer from a number on)."""
        self._pub: zmq.Socket[bytes] | None = None
        self._router: zmq.asyncio.Socket | None = None
        self._task: asyncio.Task[Any] | None = None
        self._log = structlog.get_logger(__name__).bind(server=name)

    @property
    def events_address(self) -> str:
        """``tcp://host:port`` of the PUB socket (known once started)."""
        return f"tcp://{self.host}:{self.port}"

    @property
    def replay_address(self) -> str | None:
        """``tcp://host:port`` of the replay socket; ``None``: no replay."""
        return None if self.replay_port is None else f"tcp://{self.host}:{self.replay_port}"

    def start(self) -> None:
        """Bind the sockets (a port 0 becomes a free one) and serve replays."""
        pub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUB)
        pub.setsockopt(zmq.LINGER, 0)
        self.port = _bind(pub, self.host, self.spec.port)
        self._pub = pub
        if self.spec.replay_port is not None:
            router = zmq.asyncio.Context.instance().socket(zmq.ROUTER)
            router.setsockopt(zmq.LINGER, 0)
            router.setsockopt(zmq.SNDHWM, self.spec.replay_sndhwm)
            self.replay_port = _bind(router, self.host, self.spec.replay_port)
            self._router = router
            self._task = guarded_task(self._serve_replay(), name=f"sim-kv-replay-{self.name}")
        self._log.info(
            "KV events published",
            events=self.events_address,
            replay=self.replay_address,
            layout=self.layout,
        )

    async def stop(self) -> None:
        """Close the sockets."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for sock in (self._pub, self._router):
            if sock is not None:
                sock.close()
        self._pub = self._router = None

    def restart(self) -> None:
        """A new process: numbers from 0, nothing kept."""
        self.seq = 0
        self.buffer.clear()

    def drop(self, count: int) -> None:
        """Keep the next ``count`` batches from the PUB socket (replay still has them)."""
        self._drop += count

    def cut(self, seconds: float) -> None:
        """Keep every batch from the PUB socket for ``seconds`` (wall clock, the subscriber's
        time): a subscriber cut off from the server that long (replay still has them)."""
        self._cut_until = time.monotonic() + seconds

    def publish(self, events: Sequence[SimKvEvent]) -> None:
        """One engine step's events; never blocks (PUB drops past its high-water mark)."""
        if not events or self._pub is None:
            return
        hashes_as_bytes = self.spec.hashes == "bytes"
        if hashes_as_bytes:
            events = [_as_bytes(e) for e in events]
        payload = encode_batch(
            events, layout=self.layout, ts=time.time(), block_size=self.block_size
        )
        seq, self.seq = self.seq, self.seq + 1
        self.buffer.append((seq, payload))
        if self._drop:
            self._drop -= 1
            return
        if time.monotonic() < self._cut_until:
            return
        # A PUB socket past its high-water mark drops, as vLLM's does.
        with contextlib.suppress(zmq.Again):
            self._pub.send_multipart(
                [self.spec.topic.encode(), seq.to_bytes(8, "big"), payload], flags=zmq.NOBLOCK
            )

    async def _serve_replay(self) -> None:
        router = self._router
        assert router is not None
        while True:
            frames = await router.recv_multipart()
            if len(frames) != 3:
                self._log.warning("bad KV replay request", frames=len(frames))
                continue
            client, _, start_bytes = frames
            start = int.from_bytes(start_bytes, "big", signed=True)
            self.replays += 1
            topic = [self.spec.topic.encode()] if self.spec.replay_topic else []
            for seq, payload in list(self.buffer):
                if seq >= start:
                    await router.send_multipart(
                        [client, b"", *topic, seq.to_bytes(8, "big"), payload]
                    )
            await router.send_multipart([client, b"", *([b""] if topic else []), _END, b""])


def layout_for(engine: str, layout: str | None, *, hashes: str = "int") -> str:
    """The layout a server of ``engine`` publishes: ``layout``, or the engine's newest; a
    layout the engine never wrote, or an engine that publishes none, is a ``ValueError`` (a
    simulated server does not pretend to be another engine)."""
    if engine == "vllm":
        chosen = layout or "vllm-0.26"
        if not chosen.startswith("vllm-"):
            raise ValueError(f"a vLLM server publishes a vLLM layout, not {chosen}")
        return chosen
    if engine == "sglang":
        if layout not in (None, "sglang"):
            raise ValueError(f"an SGLang server publishes layout sglang, not {layout}")
        if hashes != "int":
            raise ValueError("SGLang's block hashes are ints")
        return "sglang"
    raise ValueError(f"{engine} publishes no KV events on this wire (vLLM's and SGLang's only)")


def _bind(sock: zmq.Socket[Any], host: str, port: int) -> int:
    if port == 0:
        return sock.bind_to_random_port(f"tcp://{host}")
    sock.bind(f"tcp://{host}:{port}")
    return port


def _as_bytes(event: SimKvEvent) -> SimKvEvent:
    """vLLM's bytes hashes: the digest itself (here the int's 8 bytes, padded to 32)."""

    def b(h: int | None) -> bytes | None:
        return None if h is None else h.to_bytes(8, "big").rjust(32, b"\0")

    match event:
        case ("stored", hashes, parent, tokens):
            return ("stored", [b(h) for h in hashes], b(parent), tokens)
        case ("removed", hashes):
            return ("removed", [b(h) for h in hashes])
    return event
