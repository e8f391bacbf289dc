"""Decoding KV-event payloads: every layout named in docs/kv-events.md, both hash forms, and a
clear refusal of anything else."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xds_control.errors import KvLayoutError
from xds_control.signals.kv_wire import (
    AllCleared,
    BlocksRemoved,
    BlocksStored,
    Layout,
    decode_batch,
)

enc = msgspec.msgpack.encode
TOKENS = list(range(100, 132))  # two blocks of 16
TOP = (1 << 64) - 1


def test_vllm_0_9_arrays_with_int_hashes() -> None:
    payload = enc(
        [
            1.5,
            [
                ["BlockStored", [7, TOP], None, TOKENS, 16, None],
                ["BlockRemoved", [7]],
                ["AllBlocksCleared"],
            ],
        ]
    )
    batch = decode_batch(payload)
    assert batch.layout is Layout.ARRAYS
    assert batch.ts == 1.5
    assert batch.data_parallel_rank is None
    stored, removed, cleared = batch.events
    assert isinstance(stored, BlocksStored)
    assert stored.block_hashes == [7, TOP]
    assert stored.parent_block_hash is None
    assert stored.token_ids == TOKENS
    assert stored.medium is None
    assert stored.keyed_by_tokens_alone
    assert removed == BlocksRemoved(block_hashes=[7])
    assert cleared == AllCleared()


def test_later_arrays_with_bytes_hashes_medium_lora_and_extra_keys() -> None:
    digest = bytes(range(32))
    stored = ["BlockStored", [digest], b"p" * 32, TOKENS[:16], 16, None, "GPU", None, [None], 0]
    payload = enc([2.0, [stored, ["BlockRemoved", [digest], "GPU", 0]], 3])
    batch = decode_batch(payload)
    assert batch.layout is Layout.ARRAYS
    assert batch.data_parallel_rank == 3
    event = batch.events[0]
    assert isinstance(event, BlocksStored)
    assert event.block_hashes == [digest]
    assert event.parent_block_hash == b"p" * 32
    assert event.medium == "GPU"
    assert event.group_idx == 0
    assert event.keyed_by_tokens_alone


def test_blocks_keyed_by_more_than_tokens_say_so() -> None:
    salted = ["BlockStored", [1], None, TOKENS[:16], 16, None, "GPU", None, [["salt"]]]
    lora = ["BlockStored", [2], None, TOKENS[:16], 16, 3, "GPU", "adapter"]
    events = decode_batch(enc([0.0, [salted, lora]])).events
    assert all(isinstance(e, BlocksStored) and not e.keyed_by_tokens_alone for e in events)


def test_map_events_in_an_array_batch() -> None:
    event = {
        "type": "BlockStored",
        "block_hashes": [15760518052499183552],
        "parent_block_hash": None,
        "token_ids": TOKENS[:16],
        "block_size": 16,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
        "extra_keys": [None],
        "group_idx": 0,
        "kv_cache_spec_kind": "full_attention",
    }
    batch = decode_batch(enc([1789095808.8, [event, {"type": "AllBlocksCleared"}], 0]))
    assert batch.layout is Layout.MAP_EVENTS
    assert isinstance(batch.events[0], BlocksStored)
    assert batch.events[0].block_hashes == [15760518052499183552]
    assert batch.events[1] == AllCleared()


def test_a_map_batch() -> None:
    payload = enc({"ts": 1.0, "events": [{"type": "BlockRemoved", "block_hashes": [5]}]})
    batch = decode_batch(payload)
    assert batch.layout is Layout.MAPS
    assert batch.events == [BlocksRemoved(block_hashes=[5])]


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"\xc1", "malformed"),
        (enc([1.0, [["BlockEvicted", [1]]]]), "BlockEvicted"),
        (enc([1.0, [["BlockRemoved", [1], "GPU", 0, "a field from the future"]]]), "length"),
        (enc([1.0, [{"type": "BlockRemoved", "block_hashes": [1], "locality": "x"}]]), "locality"),
        (enc([1.0, [["BlockStored", ["not a hash"], None, TOKENS[:16], 16, None]]]), "str"),
        (enc([1.0, [["BlockStored", [1, 2], None, TOKENS[:16], 16, None]]]), "token ids"),
        (enc([1.0, [["AllBlocksCleared"], {"type": "AllBlocksCleared"}]]), "array and map"),
        (enc({"ts": 1.0}), "events"),
    ],
)
def test_an_unknown_layout_is_refused_with_the_reason(payload: bytes, says: str) -> None:
    with pytest.raises(KvLayoutError, match=says):
        decode_batch(payload)


@given(st.binary(max_size=64))
def test_garbage_is_a_refusal_never_another_error(payload: bytes) -> None:
    with contextlib.suppress(KvLayoutError):
        decode_batch(payload)


@given(st.lists(st.one_of(st.integers(0, TOP), st.binary(min_size=32, max_size=32)), max_size=4))
def test_any_hash_of_either_form_round_trips(hashes: list[Any]) -> None:
    tokens = list(range(16 * len(hashes)))
    payload = enc([0.0, [["BlockStored", hashes, None, tokens, 16, None, "GPU"]]])
    event = decode_batch(payload).events[0]
    assert isinstance(event, BlocksStored)
    assert event.block_hashes == hashes
