"""The cache's version diffs: which names changed between two published versions, worked out by
the first stream that asks and reused by the others, from digests only."""

from __future__ import annotations

import sys

from two_pools import ONLY_A, snapshot
from xds_control.cache import DEFAULT_GROUP, MemorySnapshotCache
from xds_control.cache.diffs import VersionDiffs
from xds_control.xds import type_urls as urls


def test_a_weight_change_in_one_pool_changes_one_name() -> None:
    cache = MemorySnapshotCache()
    before, after = snapshot(a=10), snapshot(a=20)
    cache.set_snapshot(DEFAULT_GROUP, before)
    cache.set_snapshot(DEFAULT_GROUP, after)
    old = before.load_assignments.version
    assert cache.changed_names(old, after.load_assignments) == frozenset({"a"})
    # A type whose version did not move: nothing to look at.
    assert cache.changed_names(before.clusters.version, after.clusters) == frozenset()


def test_the_first_to_ask_computes_the_others_reuse() -> None:
    cache = MemorySnapshotCache()
    before, after = snapshot(a=10), snapshot(a=20)
    cache.set_snapshot(DEFAULT_GROUP, before)
    cache.set_snapshot(DEFAULT_GROUP, after)
    old = before.load_assignments.version
    first = cache.changed_names(old, after.load_assignments)
    assert first is not None
    assert all(cache.changed_names(old, after.load_assignments) is first for _ in range(1000))


def test_a_version_never_published_or_forgotten_is_not_known() -> None:
    cache = MemorySnapshotCache()
    cache.set_snapshot(DEFAULT_GROUP, snapshot(a=10))
    assert cache.changed_names("some-old-version", snapshot(a=20).load_assignments) is None
    diffs = VersionDiffs(keep=2)
    sets = [snapshot(a=w).load_assignments for w in (10, 20, 30)]
    for resources in sets:
        diffs.remember(resources)
    assert diffs.changed_names(sets[0].version, sets[2]) is None  # only the last two are kept
    assert diffs.changed_names(sets[1].version, sets[2]) == frozenset({"a"})


def test_removed_and_added_names_count_as_changed() -> None:
    diffs = VersionDiffs()
    two = snapshot().load_assignments
    only_a = snapshot(text=ONLY_A).load_assignments
    diffs.remember(two)
    diffs.remember(only_a)
    assert diffs.changed_names(two.version, only_a) == frozenset({"b"})
    assert diffs.changed_names(only_a.version, two) == frozenset({"b"})


def test_only_digests_are_kept_never_the_resources() -> None:
    diffs = VersionDiffs()
    resources = snapshot().resource_set(urls.ENDPOINT)
    prepared = list(resources.resources.values())
    counts = [sys.getrefcount(p) for p in prepared]
    diffs.remember(resources)
    diffs.changed_names(resources.version, snapshot(a=20).resource_set(urls.ENDPOINT))
    assert [sys.getrefcount(p) for p in prepared] == counts  # no reference held to any of them
