"""The simulator's KV-cache events, read as each supported vLLM release's own structs read them,
and the control plane's subscriber keeping up through gaps, a cut-off and a restart.

The vLLM structs below are written as vLLM's ``vllm/distributed/kv_events.py`` declares them in
each release (field order and struct options: what the bytes depend on); a release whose
structs cannot decode the simulator's bytes fails here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import aiohttp
import msgspec
import pytest
import zmq
import zmq.asyncio

from component.sim.simclient import stream_completion, words
from xds_control.signals.kv_subscriber import KvEndpoint, KvSubscriber
from xds_control.signals.kv_wire import AllCleared, BlocksRemoved, BlocksStored, KvEvent
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.profiles import get_profile
from xds_lab.sim.server import SimServer
from xds_lab.sim.tokenizer import encode
from xds_lab.sim.tokens import BLOCK_SIZE

# -- vLLM 0.9.0 ---------------------------------------------------------------------------


class V09EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]


class V09KVCacheEvent(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class V09BlockStored(V09KVCacheEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None


class V09BlockRemoved(V09KVCacheEvent, tag="BlockRemoved"):
    block_hashes: list[int]


class V09AllBlocksCleared(V09KVCacheEvent, tag="AllBlocksCleared"):
    pass


class V09KVEventBatch(V09EventBatch):
    events: list[V09BlockStored | V09BlockRemoved | V09AllBlocksCleared]


# -- vLLM 0.11.2: medium; ExternalBlockHash = bytes | int; the batch's data_parallel_rank -----

ExternalBlockHash = bytes | int


class V011EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class V011BlockStored(V09KVCacheEvent, tag="BlockStored"):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class V011BlockRemoved(V09KVCacheEvent, tag="BlockRemoved"):
    block_hashes: list[ExternalBlockHash]
    medium: str | None


class V011KVEventBatch(V011EventBatch):
    events: list[V011BlockStored | V011BlockRemoved | V09AllBlocksCleared]


# -- vLLM 0.15.0: lora_name -------------------------------------------------------------------


class V015BlockStored(V09KVCacheEvent, tag="BlockStored"):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None


class V015KVEventBatch(V011EventBatch):
    events: list[V015BlockStored | V011BlockRemoved | V09AllBlocksCleared]


# -- vLLM 0.26: events as tagged maps (PR #42892), extra_keys, group_idx, cache-spec kind -----


class V026KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class V026BlockStored(V026KVCacheEvent, tag="BlockStored"):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class V026BlockRemoved(V026KVCacheEvent, tag="BlockRemoved"):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None


class V026AllBlocksCleared(V026KVCacheEvent, tag="AllBlocksCleared"):
    pass


class V026KVEventBatch(V011EventBatch):
    events: list[V026BlockStored | V026BlockRemoved | V026AllBlocksCleared]


# -- SGLang (sglang/srt/disaggregation/kv_events.py): its own copy of vLLM 0.9's structs, field
# for field, so the classes above decode what it sends.


RELEASES: dict[str, type[msgspec.Struct]] = {
    "vllm-0.9": V09KVEventBatch,
    "vllm-0.11": V011KVEventBatch,
    "vllm-0.15": V015KVEventBatch,
    "vllm-0.26": V026KVEventBatch,
    "sglang": V09KVEventBatch,
}

HashOf = Callable[[int], int | bytes]


def _held(server: SimServer, as_wire: HashOf) -> set[int | bytes]:
    """The blocks the simulated server's cache holds now, as its events name them."""
    kv = server.scheduler.kv
    return {as_wire(h & ((1 << 64) - 1)) for h in [*kv._refs, *kv._evictable]}


def _wire_int(h: int) -> int | bytes:
    return h


def _wire_bytes(h: int) -> int | bytes:
    return h.to_bytes(8, "big").rjust(32, b"\0")


def _wire_signed(h: int) -> int | bytes:
    return h - (1 << 64) if h >= 1 << 63 else h


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        yield session


@pytest.fixture
async def publishing() -> AsyncIterator[Callable[..., Any]]:
    started: list[SimServer] = []

    async def start(
        *,
        layout: str = "vllm-0.26",
        hashes: str = "int",
        replay_sndhwm: int = 1_000,
        replay_topic: bool = False,
        **over: Any,
    ) -> SimServer:
        over.setdefault("jitter", 0.0)
        engine = "sglang" if layout == "sglang" else "vllm"
        profile = get_profile(f"{engine}-h100", **over).scaled(0.05)
        spec = KvEventsSpec.model_validate(
            {
                "layout": layout,
                "hashes": hashes,
                "replay_sndhwm": replay_sndhwm,
                "replay_topic": replay_topic,
                "topic": "kv-events" if replay_topic else "",
            }
        )
        server = SimServer(name=f"kv-{layout}", profile=profile, kv_events=spec)
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.stop()


async def _replay_all(address: str) -> list[tuple[int, bytes]]:
    """Every batch the server's replay socket still holds, asked as vLLM's subscriber asks."""
    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    try:
        await sock.send_multipart([b"", (0).to_bytes(8, "big")])
        out: list[tuple[int, bytes]] = []
        while True:
            frames = await asyncio.wait_for(sock.recv_multipart(), 10)
            _, seq, payload = frames
            if int.from_bytes(seq, "big", signed=True) == -1:
                return out
            out.append((int.from_bytes(seq, "big"), payload))
    finally:
        sock.close()


def _apply_vllm(held: set[int | bytes], batch: Any) -> None:
    for event in batch.events:
        name = type(event).__name__
        if name.endswith("BlockStored"):
            held.update(event.block_hashes)
        elif name.endswith("BlockRemoved"):
            held.difference_update(event.block_hashes)
        else:
            held.clear()


@pytest.mark.parametrize(
    ("layout", "hashes"),
    [
        ("vllm-0.9", "int"),
        ("vllm-0.11", "int"),
        ("vllm-0.11", "bytes"),
        ("vllm-0.15", "int"),
        ("vllm-0.26", "int"),
        ("vllm-0.26", "bytes"),
        ("sglang", "int"),
    ],
)
async def test_each_release_decodes_what_the_simulator_publishes(
    http: aiohttp.ClientSession, publishing: Callable[..., Any], layout: str, hashes: str
) -> None:
    # 12 blocks: the third 64-token prompt evicts the first one's blocks.
    server = await publishing(layout=layout, hashes=hashes, kv_blocks=12)
    prompts = [words(64, prefix=p) for p in ("a", "b", "c")]
    for prompt in prompts:
        assert (await stream_completion(http, server.url, prompt, max_tokens=1)).status == 200
    assert server.kv_publisher is not None
    assert server.kv_publisher.replay_address is not None
    batches = await _replay_all(server.kv_publisher.replay_address)

    decoder = msgspec.msgpack.Decoder(RELEASES[layout])
    decoded: list[Any] = [decoder.decode(payload) for _, payload in batches]
    assert [seq for seq, _ in batches] == list(range(len(batches)))
    stored = [e for b in decoded for e in b.events if type(e).__name__.endswith("BlockStored")]
    removed = [e for b in decoded for e in b.events if type(e).__name__.endswith("BlockRemoved")]
    # What a reader of these events learns: every prompt's blocks with their token ids...
    # (SGLang's radix cache sends one event per page, its parent the page before).
    pages = 1 if layout == "sglang" else 4
    first = stored[0]
    assert first.block_size == BLOCK_SIZE
    assert first.parent_block_hash is None
    assert first.token_ids == encode(prompts[0].split())[: pages * BLOCK_SIZE]
    assert len(first.block_hashes) == pages
    assert all(isinstance(h, int if hashes == "int" else bytes) for h in first.block_hashes)
    assert sum(len(e.block_hashes) for e in stored) == 12
    if layout == "sglang":
        assert [e.parent_block_hash for e in stored[1:4]] == [e.block_hashes[0] for e in stored[:3]]
        assert any(h < 0 for e in stored for h in e.block_hashes)  # signed 64-bit, as SGLang's
    # ...the evictions the third prompt caused, and so exactly what the server now holds.
    assert removed
    held: set[int | bytes] = set()
    for batch in decoded:
        _apply_vllm(held, batch)
    as_wire = {"int": _wire_int, "bytes": _wire_bytes}[hashes]
    if layout == "sglang":
        as_wire = _wire_signed
    assert held == _held(server, as_wire)


class _Blocks:
    """A sink that keeps, per server, the blocks the events say it holds."""

    def __init__(self) -> None:
        self.held: set[int | bytes] = set()
        self.cleared = 0

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        for event in events:
            if isinstance(event, BlocksStored):
                self.held.update(event.block_hashes)
            elif isinstance(event, BlocksRemoved):
                self.held.difference_update(event.block_hashes)
            elif isinstance(event, AllCleared):
                self.held.clear()
                self.cleared += 1


async def _eventually(check: Callable[[], bool], *, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the timeout"
        await asyncio.sleep(0.02)


def _subscriber(server: SimServer, sink: _Blocks, *, pause_s: float = 0.5) -> KvSubscriber:
    publisher = server.kv_publisher
    assert publisher is not None
    endpoint = KvEndpoint(
        server=server.name, events=publisher.events_address, replay=publisher.replay_address
    )
    return KvSubscriber(endpoint=endpoint, sink=sink, replay_timeout_s=5.0, replay_pause_s=pause_s)


@pytest.mark.parametrize("replay_topic", [False, True])
async def test_the_subscriber_replays_dropped_batches_and_a_cut_off(
    http: aiohttp.ClientSession, publishing: Callable[..., Any], replay_topic: bool
) -> None:
    """``replay_topic``: the answers carry the topic first, as vLLM 0.32 sends them (before
    the subscriber took them, it refused every such answer and counted the batches lost)."""
    server = await publishing(kv_blocks=40, replay_topic=replay_topic)
    assert server.kv_publisher is not None
    sink = _Blocks()
    subscriber = _subscriber(server, sink)
    task = asyncio.create_task(subscriber.run())
    try:
        # Before the subscriber existed: the replay from 0 at start brings it.
        await stream_completion(http, server.url, words(48, prefix="early"), max_tokens=1)
        await _eventually(lambda: sink.held == _held(server, _wire_int) and bool(sink.held))

        # Three batches miss the PUB socket; the next one shows the gap and a replay fills it.
        server.kv_publisher.drop(3)
        for p in ("d1", "d2", "d3", "d4"):
            await stream_completion(http, server.url, words(64, prefix=p), max_tokens=1)
        await _eventually(lambda: sink.held == _held(server, _wire_int))
        assert subscriber.status().last_seq == server.kv_publisher.seq - 1

        # Cut off: nothing is received while it is away; back, it asks from where it stopped.
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for p in ("x1", "x2", "x3"):
            await stream_completion(http, server.url, words(80, prefix=p), max_tokens=1)
        assert sink.held != _held(server, _wire_int)
        task = asyncio.create_task(subscriber.run())
        await _eventually(lambda: sink.held == _held(server, _wire_int))
        status = subscriber.status()
        assert status.lost == 0
        assert status.refused == 0
        assert status.last_seq == server.kv_publisher.seq - 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_restarted_server_is_taken_as_cleared(
    http: aiohttp.ClientSession, publishing: Callable[..., Any]
) -> None:
    server = await publishing(kv_blocks=40)
    sink = _Blocks()
    subscriber = _subscriber(server, sink)
    task = asyncio.create_task(subscriber.run())
    try:
        for p in ("a", "b"):
            await stream_completion(http, server.url, words(64, prefix=p), max_tokens=1)
        await _eventually(lambda: len(sink.held) == 8)
        await server.restart(downtime=0.1)
        # A PUB socket drops what it sends before a subscriber has reconnected (vLLM's too),
        # so the first batch after the restart can be lost on a busy machine (a CI run lost
        # it): a live server keeps publishing, and its next batch, numbered at or below the
        # last one seen, shows the restart and has the rest replayed. Prompts go on, a second
        # apart, until it has.
        for turn in range(10):
            prompt = words(32, prefix=f"after{turn}")
            await stream_completion(http, server.url, prompt, max_tokens=1)
            with contextlib.suppress(AssertionError):
                await _eventually(lambda: subscriber.status().restarts > 0, timeout=1.0)
                break
        # Its numbers started again at 0: the old blocks are gone, the new prompts' are held.
        await _eventually(lambda: sink.held == _held(server, _wire_int))
        assert len(sink.held) == 2 * (turn + 1)
        assert subscriber.status().restarts == 1
        assert sink.cleared == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_subscription_that_fails_is_retried_not_lost() -> None:
    sink = _Blocks()
    bad = KvEndpoint(server="10.0.0.9:8000", events="tcp://127.0.0.1:not-a-port", replay=None)
    subscriber = KvSubscriber(endpoint=bad, sink=sink)
    tries = 0
    real_run = subscriber.run

    async def counted() -> None:
        nonlocal tries
        tries += 1
        await real_run()

    subscriber.run = counted  # type: ignore[method-assign]
    task = asyncio.create_task(subscriber.run_forever(backoff_s=0.01, max_backoff_s=0.02))
    try:
        await _eventually(lambda: tries >= 3)
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# A replay of 3,000 batches, beyond ZMQ's default receive high-water mark (1,000): the
# subscriber takes them all. A CI run on the loaded lane held 1,407 of 3,000 when the server's
# ROUTER (send high-water mark 1,000, as vLLM leaves it) dropped answers the starved reader had
# not taken, before the subscriber asked again for holes (the next test makes those certain).
async def test_a_long_replay_is_taken_whole(publishing: Callable[..., Any]) -> None:
    server = await publishing(kv_blocks=40)
    publisher = server.kv_publisher
    assert publisher is not None
    # Three thousand engine steps before the subscriber starts: its replays bring all.
    for n in range(3000):
        publisher.publish([("stored", [n + 1], None, list(range(16)))])
    sink = _Blocks()
    subscriber = _subscriber(server, sink)
    task = asyncio.create_task(subscriber.run())
    try:
        await _eventually(lambda: subscriber.status().last_seq == 2999, timeout=30)
        assert len(sink.held) == 3000
        assert subscriber.status().lost == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_replay_that_comes_back_with_holes_is_asked_again(
    publishing: Callable[..., Any],
) -> None:
    # A ROUTER that keeps 20 answers for a reader that has not taken them (ZMQ drops the
    # rest, its end marker too, unless it drained meanwhile): every round brings the first 20
    # from where it was asked, and the engine goes on stepping, as a live one does.
    server = await publishing(kv_blocks=40, replay_sndhwm=20)
    publisher = server.kv_publisher
    assert publisher is not None
    for n in range(300):
        publisher.publish([("stored", [n + 1], None, list(range(16)))])

    async def engine_steps() -> None:
        for n in range(300, 400):
            await asyncio.sleep(0.02)
            publisher.publish([("stored", [n + 1], None, list(range(16)))])

    sink = _Blocks()
    subscriber = _subscriber(server, sink, pause_s=0.05)
    task = asyncio.create_task(subscriber.run())
    steps = asyncio.create_task(engine_steps())
    try:
        await _eventually(lambda: subscriber.status().last_seq == 399, timeout=30)
        assert len(sink.held) == 400
        assert subscriber.status().lost == 0
        assert publisher.replays > 1
    finally:
        for t in (task, steps):
            t.cancel()
        await asyncio.gather(task, steps, return_exceptions=True)
