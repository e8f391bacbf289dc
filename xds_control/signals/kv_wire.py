"""vLLM's KV-cache events on the wire, decoded: one payload -> one ``KvBatch``, or a refusal.

vLLM (``--kv-events-config``, publisher ``zmq``) sends each engine step's events as a ZMQ
multipart message ``(topic, 8-byte big-endian sequence number, payload)``; the payload is a
msgpack ``KVEventBatch`` of tagged events ``BlockStored``, ``BlockRemoved`` and
``AllBlocksCleared``. Its layout has changed between releases (docs/kv-events.md names them):

- **arrays** (vLLM 0.9 to the switch of PR #42892): the batch is ``[ts, events]``, later
  ``[ts, events, data_parallel_rank]``; each event an array, its tag first. ``BlockStored`` is
  ``[tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id]`` in 0.9, then grew
  at the end: ``medium``, ``lora_name``, ``extra_keys``, ``group_idx``,
  ``kv_cache_spec_kind``, ``kv_cache_spec_sliding_window``; ``BlockRemoved`` grew ``medium``
  and ``group_idx``. Fields with defaults at the end may be left out (msgspec's
  ``omit_defaults``), so one positional struct with those fields optional reads every one of
  these releases, and nothing else: an array longer than the newest is refused.
- **maps** (since PR #42892, e.g. vLLM 0.26): the batch is still an array, each event a map
  whose ``type`` key holds the tag. The batch itself as a map (``ts``, ``events``,
  ``data_parallel_rank``) is read too: vLLM's main branch drops the batch's array form as well.

Hashes are ints (the low 64 bits of the engine's digest, up to 2**64 - 1) or bytes (the whole
digest). Unknown fields, tags or types are refused (``KvLayoutError``), not skipped: a field
this build does not know may change what a block's key means (a cache salt does), and the index
keys blocks by their tokens. Pure: bytes in, values out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from xds_control.errors import KvLayoutError

__all__ = [
    "AllCleared",
    "BlockHash",
    "BlocksRemoved",
    "BlocksStored",
    "KvBatch",
    "KvEvent",
    "Layout",
    "decode_batch",
]

BlockHash = int | bytes
"""An engine's block hash: an int (low 64 bits of its digest) or the digest's bytes."""


class Layout(StrEnum):
    """How a payload was laid out: batch shape / event shape."""

    ARRAYS = "arrays"
    """Array batch, array events: vLLM 0.9 up to PR #42892."""
    MAP_EVENTS = "map-events"
    """Array batch, map events: since PR #42892 (vLLM 0.26 publishes it)."""
    MAPS = "maps"
    """Map batch, map events: vLLM's main branch after the batch lost its array form too."""


# -- What the rest of the control plane sees: one form whatever the layout. ------------------


class BlocksStored(msgspec.Struct, frozen=True, gc=False):
    """Full blocks the engine now holds: ``block_hashes[i]`` covers ``token_ids[i * block_size
    : (i + 1) * block_size]`` and chains on ``parent_block_hash`` (``None``: the prompt's
    first block)."""

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None
    medium: str | None = None
    lora_name: str | None = None
    extra_keys: list[list[Any] | None] | None = None
    """Per block, what else its hash covers (multimodal inputs, LoRA, cache salt)."""
    group_idx: int | None = None

    @property
    def keyed_by_tokens_alone(self) -> bool:
        """Whether the blocks' identity is their tokens only: no adapter, no extra keys. Only
        such blocks can be matched to a prompt by its tokens."""
        extra = self.extra_keys
        return (
            self.lora_id is None
            and self.lora_name is None
            and (extra is None or all(k is None for k in extra))
        )


class BlocksRemoved(msgspec.Struct, frozen=True, gc=False):
    """Blocks the engine evicted, by the hashes it stored them under."""

    block_hashes: list[BlockHash]
    medium: str | None = None
    group_idx: int | None = None


class AllCleared(msgspec.Struct, frozen=True, gc=False):
    """The engine dropped its whole prefix cache (a reset, or a restart as the subscriber
    infers it)."""


KvEvent = BlocksStored | BlocksRemoved | AllCleared


class KvBatch(msgspec.Struct, frozen=True, gc=False):
    """One payload: the events of one engine step, in order."""

    ts: float
    events: list[KvEvent]
    data_parallel_rank: int | None
    layout: Layout


# -- The wire forms (our own structs, vLLM's field order). -----------------------------------


class _StoredArray(
    msgspec.Struct,
    tag="BlockStored",
    array_like=True,
    forbid_unknown_fields=True,
    frozen=True,
    gc=False,
):
    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None
    lora_name: str | None = None
    extra_keys: list[list[Any] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class _RemovedArray(
    msgspec.Struct,
    tag="BlockRemoved",
    array_like=True,
    forbid_unknown_fields=True,
    frozen=True,
    gc=False,
):
    block_hashes: list[BlockHash]
    medium: str | None = None
    group_idx: int | None = None


class _ClearedArray(
    msgspec.Struct,
    tag="AllBlocksCleared",
    array_like=True,
    forbid_unknown_fields=True,
    frozen=True,
    gc=False,
):
    pass


class _StoredMap(
    msgspec.Struct, tag="BlockStored", forbid_unknown_fields=True, frozen=True, gc=False
):
    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None = None
    medium: str | None = None
    lora_name: str | None = None
    extra_keys: list[list[Any] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class _RemovedMap(
    msgspec.Struct, tag="BlockRemoved", forbid_unknown_fields=True, frozen=True, gc=False
):
    block_hashes: list[BlockHash]
    medium: str | None = None
    group_idx: int | None = None


class _ClearedMap(
    msgspec.Struct, tag="AllBlocksCleared", forbid_unknown_fields=True, frozen=True, gc=False
):
    pass


class _ArrayBatch(
    msgspec.Struct, array_like=True, forbid_unknown_fields=True, frozen=True, gc=False
):
    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


class _MapBatch(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    ts: float
    events: list[msgspec.Raw]
    data_parallel_rank: int | None = None


_Wire = _StoredArray | _RemovedArray | _ClearedArray | _StoredMap | _RemovedMap | _ClearedMap

_ARRAY_BATCH = msgspec.msgpack.Decoder(_ArrayBatch)
_MAP_BATCH = msgspec.msgpack.Decoder(_MapBatch)
_ARRAY_EVENT = msgspec.msgpack.Decoder(_StoredArray | _RemovedArray | _ClearedArray)
_MAP_EVENT = msgspec.msgpack.Decoder(_StoredMap | _RemovedMap | _ClearedMap)


def _is_map(raw: bytes | msgspec.Raw) -> bool:
    """Whether a msgpack value is a map, from its first byte (fixmap, map 16, map 32)."""
    first = bytes(memoryview(raw)[:1])
    return bool(first) and (0x80 <= first[0] <= 0x8F or first[0] in (0xDE, 0xDF))


def _event(wire: _Wire) -> KvEvent:
    if isinstance(wire, _StoredArray | _StoredMap):
        return BlocksStored(
            block_hashes=wire.block_hashes,
            parent_block_hash=wire.parent_block_hash,
            token_ids=wire.token_ids,
            block_size=wire.block_size,
            lora_id=wire.lora_id,
            medium=wire.medium,
            lora_name=wire.lora_name,
            extra_keys=wire.extra_keys,
            group_idx=wire.group_idx,
        )
    if isinstance(wire, _RemovedArray | _RemovedMap):
        return BlocksRemoved(
            block_hashes=wire.block_hashes, medium=wire.medium, group_idx=wire.group_idx
        )
    return AllCleared()


def _check(event: KvEvent) -> None:
    if isinstance(event, BlocksStored):
        size = event.block_size
        if size < 1 or len(event.token_ids) != size * len(event.block_hashes):
            raise KvLayoutError(
                f"BlockStored with {len(event.block_hashes)} blocks of {size} tokens "
                f"carries {len(event.token_ids)} token ids"
            )


def decode_batch(payload: bytes) -> KvBatch:
    """The batch in ``payload``, in any layout of ``Layout``.

    Raises ``KvLayoutError`` naming what does not fit: not msgpack, an unknown tag, a field
    this build does not know, a value of the wrong type, or a ``BlockStored`` whose token ids
    do not fill its blocks.
    """
    try:
        batch: _ArrayBatch | _MapBatch = (
            _MAP_BATCH.decode(payload) if _is_map(payload) else _ARRAY_BATCH.decode(payload)
        )
        maps = [_is_map(raw) for raw in batch.events]
        if any(maps) and not all(maps):
            raise KvLayoutError("a batch of array and map events")
        events = [
            _event((_MAP_EVENT if is_map else _ARRAY_EVENT).decode(raw))
            for raw, is_map in zip(batch.events, maps, strict=True)
        ]
    except msgspec.DecodeError as exc:  # ValidationError is one
        raise KvLayoutError(str(exc)) from exc
    for event in events:
        _check(event)
    if isinstance(batch, _MapBatch):
        layout = Layout.MAPS
    elif maps and maps[0]:
        layout = Layout.MAP_EVENTS
    else:
        layout = Layout.ARRAYS
    return KvBatch(
        ts=batch.ts, events=events, data_parallel_rank=batch.data_parallel_rank, layout=layout
    )
