"""The prefix index stays within its bound, forgetting the least recently used first."""

from __future__ import annotations

from xds_control.picker.index import PrefixIndex


def test_bounded_least_recently_used_first() -> None:
    index = PrefixIndex(capacity=3)
    for key in (b"a", b"b", b"c"):
        index.put(key, "10.0.0.1:80")
    assert index.get(b"a") == "10.0.0.1:80"  # a is now the most recent
    index.put(b"d", "10.0.0.2:80")
    assert len(index) == 3
    assert index.get(b"b") is None
    assert [index.get(k) for k in (b"a", b"c", b"d")] == [
        "10.0.0.1:80",
        "10.0.0.1:80",
        "10.0.0.2:80",
    ]


def test_put_moves_a_prefix_and_forget_drops_a_server() -> None:
    index = PrefixIndex(capacity=10)
    index.put(b"a", "10.0.0.1:80")
    index.put(b"a", "10.0.0.2:80")
    index.put(b"b", "10.0.0.1:80")
    assert index.get(b"a") == "10.0.0.2:80"
    index.forget("10.0.0.1:80")
    assert index.get(b"b") is None
    assert len(index) == 1
