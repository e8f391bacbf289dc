"""The simulator's KV events in the msgpack layouts of vLLM releases, encoded.

Each layout is the struct set vLLM's ``vllm/distributed/kv_events.py`` declared in that
release, rewritten here (field order and struct options are what the bytes depend on):

- ``vllm-0.9``: arrays; ``BlockStored(block_hashes, parent_block_hash, token_ids, block_size,
  lora_id)``, ``BlockRemoved(block_hashes)``; the batch ``[ts, events]``.
- ``vllm-0.11``: arrays; ``medium`` after those fields on both, the batch's
  ``data_parallel_rank`` at its end.
- ``vllm-0.15``: arrays; ``lora_name`` after ``medium``.
- ``vllm-0.26``: the batch an array, each event a map tagged by ``type`` (vLLM PR #42892), with
  ``extra_keys``, ``group_idx`` and ``kv_cache_spec_kind``.

A sim event is a plain tuple: ``("stored", hashes, parent, token_ids)``, ``("removed",
hashes)`` or ``("cleared",)``; hashes are ints, or bytes when the server is told so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

__all__ = ["LAYOUTS", "Layout", "SimKvEvent", "encode_batch"]

SimKvEvent = tuple[Any, ...]
Layout = Literal["vllm-0.9", "vllm-0.11", "vllm-0.15", "vllm-0.26"]
Hash = int | bytes

# -- vLLM 0.9 ---------------------------------------------------------------------------------


class _Event09(msgspec.Struct, array_like=True, omit_defaults=True, gc=False, tag=True):
    pass


class _Stored09(_Event09, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None


class _Removed09(_Event09, tag="BlockRemoved"):
    block_hashes: list[Hash]


class _Cleared09(_Event09, tag="AllBlocksCleared"):
    pass


class _Batch09(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]


# -- vLLM 0.11 --------------------------------------------------------------------------------


class _Stored011(_Event09, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None


class _Removed011(_Event09, tag="BlockRemoved"):
    block_hashes: list[Hash]
    medium: str | None


class _Batch011(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


# -- vLLM 0.15 --------------------------------------------------------------------------------


class _Stored015(_Event09, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None


# -- vLLM 0.26: map events --------------------------------------------------------------------


class _Event026(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class _Stored026(_Event026, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class _Removed026(_Event026, tag="BlockRemoved"):
    block_hashes: list[Hash]
    medium: str | None
    group_idx: int | None = None


class _Cleared026(_Event026, tag="AllBlocksCleared"):
    pass


def _v09(event: SimKvEvent, block_size: int) -> Any:
    match event:
        case ("stored", hashes, parent, tokens):
            return _Stored09(hashes, parent, tokens, block_size, None)
        case ("removed", hashes):
            return _Removed09(hashes)
    return _Cleared09()


def _v011(event: SimKvEvent, block_size: int) -> Any:
    match event:
        case ("stored", hashes, parent, tokens):
            return _Stored011(hashes, parent, tokens, block_size, None, "GPU")
        case ("removed", hashes):
            return _Removed011(hashes, "GPU")
    return _Cleared09()


def _v015(event: SimKvEvent, block_size: int) -> Any:
    match event:
        case ("stored", hashes, parent, tokens):
            return _Stored015(hashes, parent, tokens, block_size, None, "GPU", None)
        case ("removed", hashes):
            return _Removed011(hashes, "GPU")
    return _Cleared09()


def _v026(event: SimKvEvent, block_size: int) -> Any:
    match event:
        case ("stored", hashes, parent, tokens):
            return _Stored026(
                hashes,
                parent,
                tokens,
                block_size,
                None,
                "GPU",
                None,
                extra_keys=[None] * len(hashes),
                group_idx=0,
                kv_cache_spec_kind="full_attention",
            )
        case ("removed", hashes):
            return _Removed026(hashes, "GPU", group_idx=0)
    return _Cleared026()


_EVENT: dict[str, Callable[[SimKvEvent, int], Any]] = {
    "vllm-0.9": _v09,
    "vllm-0.11": _v011,
    "vllm-0.15": _v015,
    "vllm-0.26": _v026,
}
LAYOUTS: tuple[str, ...] = tuple(_EVENT)
_ENCODER = msgspec.msgpack.Encoder()


def encode_batch(events: Sequence[SimKvEvent], *, layout: str, ts: float, block_size: int) -> bytes:
    """One engine step's events as the payload a vLLM of ``layout`` publishes."""
    encoded = [_EVENT[layout](e, block_size) for e in events]
    if layout == "vllm-0.9":
        return _ENCODER.encode(_Batch09(ts=ts, events=encoded))
    return _ENCODER.encode(_Batch011(ts=ts, events=encoded, data_parallel_rank=0))
