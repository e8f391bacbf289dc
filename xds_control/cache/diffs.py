"""Which names changed between two versions of one type's resources, worked out once per pair
of versions and shared by every stream that asks.

Why: a weight change in one pool touches one ClusterLoadAssignment, yet each of a thousand
streams used to look at every name it asks for to find it. A stream that was in step with
version A (``TypeState.synced``) needs to look only at the names that differ between A and the
new version B; the first stream to ask works that out, the others reuse it. The cache that
publishes the versions holds one ``VersionDiffs`` and remembers each version as it is
published. Only digests are kept (name -> digest per version), never the resources: old
snapshots are not held alive.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from google.protobuf.message import Message

from xds_control.xds import ResourceSet

__all__ = ["KEEP", "VersionDiffs"]

KEEP = 32
"""Versions (and pairs of versions) remembered: a stream further behind than that looks at
every name, as it would without diffs."""


class VersionDiffs:
    """Digests of the last ``keep`` versions per type, and the diffs asked for between them."""

    def __init__(self, *, keep: int = KEEP) -> None:
        self._keep = keep
        self._digests: OrderedDict[tuple[str, str], Mapping[str, str]] = OrderedDict()
        self._diffs: OrderedDict[tuple[str, str, str], frozenset[str]] = OrderedDict()

    def remember(self, resources: ResourceSet[Message]) -> None:
        """Keep ``resources``' digests, so that later versions can be compared with it."""
        key = (resources.type_url, resources.version)
        if key in self._digests:
            self._digests.move_to_end(key)
            return
        self._digests[key] = {name: p.digest for name, p in resources.resources.items()}
        while len(self._digests) > self._keep:
            self._digests.popitem(last=False)

    def changed_names(
        self, old_version: str, resources: ResourceSet[Message]
    ) -> frozenset[str] | None:
        """Names added, removed or changed from ``old_version`` to ``resources``; ``None`` when
        ``old_version`` is not remembered (then every name must be looked at)."""
        key = (resources.type_url, old_version, resources.version)
        found = self._diffs.get(key)
        if found is not None:
            return found
        old = self._digests.get(key[:2])
        if old is None:
            return None
        new = resources.resources
        changed = {name for name, p in new.items() if old.get(name) != p.digest}
        changed.update(name for name in old if name not in new)
        diff = self._diffs[key] = frozenset(changed)
        while len(self._diffs) > self._keep:
            self._diffs.popitem(last=False)
        self.remember(resources)
        return diff
