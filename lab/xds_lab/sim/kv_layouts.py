"""The simulator's KV events in the msgpack layouts of vLLM and SGLang releases, encoded.

Each layout is the struct set vLLM's ``vllm/distributed/kv_events.py`` (or SGLang's
``sglang/srt/disaggregation/kv_events.py``) declared in that release, rewritten here (field
order and struct options are what the bytes depend on):

- ``vllm-0.9``: arrays; ``BlockStored(block_hashes, parent_block_hash, token_ids, block_size,
  lora_id)``, ``BlockRemoved(block_hashes)``; the batch ``[ts, events]``.
- ``vllm-0.11``: arrays; ``medium`` after those fields on both, the batch's
  ``data_parallel_rank`` at its end.
- ``vllm-0.15``: arrays; ``lora_name`` after ``medium``.
- ``vllm-0.26``: the batch an array, each event a map tagged by ``type`` (vLLM PR #42892), with
  ``extra_keys``, ``group_idx`` and ``kv_cache_spec_kind``.
- ``sglang``: vLLM 0.9's structs (SGLang copied them), but as SGLang's radix cache emits them:
  one ``BlockStored`` per page (one hash, its parent the page before) and one
  ``BlockRemoved`` per evicted page, hashes signed 64-bit ints (SGLang's ``hash_str_to_int64``
  of a SHA-256, or Python's ``hash`` of the page's tokens in its first releases).

A sim event is a plain tuple: ``("stored", hashes, parent, token_ids)``, ``("removed",
hashes)`` or ``("cleared",)``; hashes are ints, or bytes when the server is told so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import msgspec

__all__ = ["LAYOUTS", "Layout", "SimKvEvent", "encode_batch"]

SimKvEvent = tuple[Any, ...]
Layout = Literal["vllm-0.9", "vllm-0.11", "vllm-0.15", "vllm-0.26", "sglang"]
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


def _signed(h: int) -> int:
    """A 64-bit hash as the signed integer SGLang sends."""
    return h - (1 << 64) if h >= 1 << 63 else h


def _sglang(event: SimKvEvent, block_size: int) -> list[Any]:
    match event:
        case ("stored", hashes, parent, tokens):
            pages = []
            for i, h in enumerate(hashes):
                page = tokens[i * block_size : (i + 1) * block_size]
                above = None if parent is None else _signed(parent)
                pages.append(_Stored09([_signed(h)], above, page, block_size, None))
                parent = h
            return pages
        case ("removed", hashes):
            return [_Removed09([_signed(h)]) for h in hashes]
    return [_Cleared09()]


def _one(encode: Callable[[SimKvEvent, int], Any]) -> Callable[[SimKvEvent, int], list[Any]]:
    return lambda event, block_size: [encode(event, block_size)]


_EVENTS: dict[str, Callable[[SimKvEvent, int], list[Any]]] = {
    "vllm-0.9": _one(_v09),
    "vllm-0.11": _one(_v011),
    "vllm-0.15": _one(_v015),
    "vllm-0.26": _one(_v026),
    "sglang": _sglang,
}
LAYOUTS: tuple[str, ...] = tuple(_EVENTS)
_ENCODER = msgspec.msgpack.Encoder()


def encode_batch(events: Sequence[SimKvEvent], *, layout: str, ts: float, block_size: int) -> bytes:
    """One engine step's events as the payload an engine release of ``layout`` publishes."""
    encoded = [out for e in events for out in _EVENTS[layout](e, block_size)]
    if layout in ("vllm-0.9", "sglang"):
        return _ENCODER.encode(_Batch09(ts=ts, events=encoded))
    return _ENCODER.encode(_Batch011(ts=ts, events=encoded, data_parallel_rank=0))
