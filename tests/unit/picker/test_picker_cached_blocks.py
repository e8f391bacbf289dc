"""The index from events: blocks keyed by their tokens (whatever the engine's hashes), followed
through stores, evictions and clears, and nothing claimed that a prompt's tokens cannot match."""

from __future__ import annotations

from xds_control.picker.cached_blocks import CachedBlocks, token_keys
from xds_control.signals.kv_wire import AllCleared, BlocksRemoved, BlocksStored

A = "10.0.0.1:8000"
B = "10.0.0.2:8000"
SYSTEM = list(range(1000, 1032))  # two blocks of 16
TURN = list(range(2000, 2016))


def stored(
    hashes: list[int | bytes], parent: int | bytes | None, tokens: list[int], **kw: object
) -> BlocksStored:
    return BlocksStored(
        block_hashes=hashes,
        parent_block_hash=parent,
        token_ids=tokens,
        block_size=16,
        **kw,  # type: ignore[arg-type]
    )


def test_keys_come_from_tokens_so_two_engines_hashes_need_not_agree() -> None:
    blocks = CachedBlocks()
    blocks.apply(A, [stored([11, 12], None, SYSTEM)])
    blocks.apply(B, [stored([b"x" * 32], None, SYSTEM[:16])])  # another hash, the same tokens
    blocks.apply(A, [stored([13], 12, TURN)])  # a next turn, chained on its parent
    prompt = token_keys([*SYSTEM, *TURN, 7, 7, 7], block_size=16)
    assert len(prompt) == 3
    assert blocks.matched(prompt) == {A: 3, B: 1}
    assert blocks.block_size == 16


def test_an_eviction_and_a_clear_take_the_claim_away() -> None:
    blocks = CachedBlocks()
    blocks.apply(A, [stored([11, 12], None, SYSTEM)])
    blocks.apply(B, [stored([21, 22], None, SYSTEM)])
    prompt = token_keys(SYSTEM, block_size=16)
    blocks.apply(A, [BlocksRemoved(block_hashes=[12])])
    assert blocks.matched(prompt) == {A: 1, B: 2}
    blocks.apply(B, [AllCleared()])
    assert blocks.matched(prompt) == {A: 1}
    blocks.forget(A)
    assert blocks.matched(prompt) == {}
    assert len(blocks) == 0


def test_blocks_a_prompt_cannot_match_are_left_out() -> None:
    blocks = CachedBlocks()
    blocks.apply(A, [stored([31], 999, TURN)])  # its parent was never seen (joined late)
    blocks.apply(A, [stored([32], None, SYSTEM[:16], lora_name="adapter")])
    blocks.apply(A, [stored([33], None, SYSTEM[:16], extra_keys=[["salt"]])])
    blocks.apply(A, [stored([34], None, SYSTEM[:16], medium="CPU")])
    blocks.apply(A, [stored([35], None, SYSTEM[:16], group_idx=1)])
    assert blocks.matched(token_keys(SYSTEM, block_size=16)) == {}
    assert blocks.skipped == 5
    assert blocks.publishes(A)
    assert not blocks.publishes(B)


def test_a_prefix_read_as_it_grows_matches_as_the_whole_prompt_does() -> None:
    blocks = CachedBlocks()
    blocks.apply(A, [stored([11, 12], None, SYSTEM)])
    blocks.apply(B, [stored([21], None, SYSTEM[:16])])
    blocks.apply(A, [stored([13], 12, TURN)])
    ids = [*SYSTEM, *TURN, *range(3000, 3040)]
    prefix = blocks.prefix(block_size=16)
    for end in (5, 16, 20, 32, 48):  # ids as a tokenizer gives them, piece by piece
        assert prefix.read(ids[:end])  # every full block so far is cached by some server
    assert prefix.matched() == {A: 3, B: 1} == blocks.matched(token_keys(ids[:48], block_size=16))
    assert not prefix.read(ids)  # the next block nobody holds: nothing after it can match
    assert prefix.ended
    assert prefix.matched() == blocks.matched(token_keys(ids, block_size=16)) == {A: 3, B: 1}
    nobody = blocks.prefix(block_size=16)
    assert not nobody.read(list(range(5000, 5016)))
    assert nobody.matched() == {}
