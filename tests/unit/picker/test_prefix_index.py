"""The prefix index: each server's longest run of a prompt's leading blocks, a few holders per
block, bounded, the least recently used blocks forgotten first."""

from __future__ import annotations

import random

from xds_control.picker.index import HOLDERS, PrefixIndex


def test_each_server_matches_its_longest_run_of_leading_blocks() -> None:
    index = PrefixIndex(capacity=100)
    index.put([b"s1", b"s2", b"q1"], "a")
    index.put([b"s1", b"s2", b"q2", b"q3"], "b")
    assert index.matched([b"s1", b"s2", b"q2", b"q3", b"q4"]) == {"a": 2, "b": 4}
    assert index.matched([b"s1", b"x", b"q2"]) == {"a": 1, "b": 1}  # a block differs: stop
    assert index.matched([b"x", b"s1"]) == {}  # no shared first block, nothing shared


def test_a_block_keeps_its_most_recent_holders() -> None:
    index = PrefixIndex(capacity=100)
    servers = [f"10.0.0.{i}:80" for i in range(HOLDERS + 1)]
    for server in servers:
        index.put([b"system"], server)
    index.put([b"system"], servers[1])  # used again: most recent, not forgotten next
    index.put([b"system"], "10.0.0.9:80")
    assert set(index.matched([b"system"])) == {servers[1], *servers[-2:], "10.0.0.9:80"}


def test_bounded_least_recently_used_first() -> None:
    index = PrefixIndex(capacity=3)
    index.put([b"a", b"b", b"c"], "10.0.0.1:80")
    assert index.matched([b"a"]) == {"10.0.0.1:80": 1}  # a is now the most recent
    index.put([b"d"], "10.0.0.2:80")
    assert len(index) == 3
    assert index.matched([b"b"]) == {}
    assert index.matched([b"d"]) == {"10.0.0.2:80": 1}


def test_matched_counts_each_servers_leading_blocks_over_random_puts() -> None:
    # Against the plain rule: a server's count is the longest run of leading blocks it is
    # among the holders of, while some server holds them all.
    rng = random.Random(3)
    servers = [f"10.0.0.{i}:80" for i in range(6)]
    for _ in range(200):
        index = PrefixIndex(capacity=1_000)
        prompts = [
            [f"{rng.randrange(3)}-{k}" for k in range(rng.randrange(1, 8))] for _ in range(6)
        ]
        for blocks in prompts:  # chained: a block names everything before it
            index.put(["/".join(blocks[: k + 1]) for k in range(len(blocks))], rng.choice(servers))
        query = rng.choice(prompts)
        keys = ["/".join(query[: k + 1]) for k in range(len(query))]
        holders = {k: set(index._holders.get(k, ())) for k in keys}
        expected: dict[str, int] = {}
        alive = set(servers)
        for n, key in enumerate(keys, start=1):
            alive &= holders[key]
            if not alive:
                break
            expected.update((s, n) for s in alive)
        assert index.matched(keys) == expected
