"""The KV cache: prefix reuse by chain hash, LRU eviction, usage accounting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from xds_lab.sim.kv_cache import Allocation, KvCache
from xds_lab.sim.tokens import block_hashes, chat_tokens, text_tokens


def _prompt(prefix: str, n: int) -> list[int]:
    return block_hashes([f"{prefix}{i}" for i in range(n)])


def test_chain_hashes_share_only_a_common_prefix() -> None:
    shared = [f"s{i}" for i in range(32)]
    a = block_hashes([*shared, *(f"a{i}" for i in range(20))])
    b = block_hashes([*shared, *(f"b{i}" for i in range(20))])
    assert a[:2] == b[:2]
    assert a[2] != b[2]
    # The same block after a different prefix is a different block.
    assert block_hashes(["x"] * 16 + ["y"] * 16)[1] != block_hashes(["z"] * 16 + ["y"] * 16)[1]
    assert len(block_hashes(["t"] * 47)) == 2  # the partial block is never hashed


def test_tokenisation_rule_is_words_plus_one_role_marker_per_message() -> None:
    assert text_tokens("  a b\nc ") == ["a", "b", "c"]
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    assert chat_tokens(messages) == ["<system>", "be", "brief", "<user>", "hi"]


def test_released_blocks_stay_cached_and_hit_again() -> None:
    cache = KvCache(100)
    hashes = _prompt("p", 64)  # 4 full blocks
    first = cache.allocate(hashes, total_blocks=6, max_hit_blocks=3)
    assert first is not None
    assert first.hit_blocks == 0
    assert cache.used_blocks == 6
    cache.release(first)
    assert cache.used_blocks == 0
    assert cache.cached_blocks == 4
    second = cache.allocate(hashes, total_blocks=6, max_hit_blocks=3)
    assert second is not None
    assert second.hit_blocks == 3  # capped: the last prompt token is always recomputed
    assert cache.usage == 0.06


def test_lru_evicts_the_oldest_cached_prefix_first() -> None:
    cache = KvCache(8)
    for prefix in ("a", "b"):
        alloc = cache.allocate(_prompt(prefix, 64), total_blocks=4, max_hit_blocks=4)
        assert alloc is not None
        cache.release(alloc)
    assert cache.cached_blocks == 8
    c = cache.allocate(_prompt("c", 64), total_blocks=4, max_hit_blocks=4)
    assert c is not None
    assert cache.match(_prompt("a", 64)) == 0  # "a" was oldest: evicted
    assert cache.match(_prompt("b", 64)) == 4


def test_allocation_fails_without_side_effects_when_full() -> None:
    cache = KvCache(5)
    held = cache.allocate(_prompt("a", 48), total_blocks=4, max_hit_blocks=3)
    assert held is not None
    assert cache.allocate(_prompt("b", 48), total_blocks=4, max_hit_blocks=3) is None
    assert cache.used_blocks == 4


def test_without_prefix_caching_nothing_is_reused() -> None:
    cache = KvCache(50, prefix_caching=False)
    hashes = _prompt("a", 64)
    for _ in range(2):
        alloc = cache.allocate(hashes, total_blocks=5, max_hit_blocks=4)
        assert alloc is not None
        assert alloc.hit_blocks == 0
        cache.release(alloc)
    assert cache.used_blocks == 0


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 6), st.integers(0, 4), st.booleans()),
        max_size=40,
    )
)
def test_accounting_never_exceeds_capacity_and_returns_to_zero(
    ops: list[tuple[int, int, int, bool]],
) -> None:
    cache = KvCache(20)
    held: list[Allocation] = []
    for prefix, blocks, extra, release_first in ops:
        if release_first and held:
            cache.release(held.pop(0))
        alloc = cache.allocate(
            _prompt(f"g{prefix}", blocks * 16), total_blocks=blocks + extra, max_hit_blocks=blocks
        )
        if alloc is not None:
            held.append(alloc)
        assert cache.used_blocks + cache.cached_blocks <= cache.capacity
    for alloc in held:
        cache.release(alloc)
    assert cache.used_blocks == 0


def test_events_name_each_new_run_of_blocks_each_eviction_and_a_clear() -> None:
    cache = KvCache(6, events=True)
    a = _prompt("a", 64)  # 4 blocks
    tokens = list(range(64))
    first = cache.allocate(a, total_blocks=4, max_hit_blocks=3, token_ids=tokens)
    assert first is not None
    (stored,) = cache.take_events()
    assert stored[0] == "stored"
    assert stored[2] is None  # the prompt's first block: no parent
    assert len(stored[1]) == 4
    assert stored[3] == tokens
    cache.release(first)
    # The same prefix again: the three reusable blocks are hits, the fourth is cached already.
    again = cache.allocate(a, total_blocks=4, max_hit_blocks=3, token_ids=tokens)
    assert again is not None
    assert cache.take_events() == []
    cache.release(again)
    # Another prompt needs 4 of 6 blocks: two of a's are evicted, least recently used first.
    b = cache.allocate(_prompt("b", 64), total_blocks=4, max_hit_blocks=3, token_ids=tokens)
    assert b is not None
    removed, stored_b = cache.take_events()
    assert removed == ("removed", [h & ((1 << 64) - 1) for h in a[:2]])
    assert stored_b[0] == "stored"
    cache.clear()
    assert cache.take_events() == [("cleared",)]


def test_no_events_unless_asked() -> None:
    cache = KvCache(6)
    assert cache.allocate(_prompt("a", 64), total_blocks=4, max_hit_blocks=3) is not None
    assert cache.take_events() == []
