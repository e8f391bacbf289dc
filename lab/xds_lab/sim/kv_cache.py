"""A paged KV cache of fixed capacity with prefix reuse and LRU eviction.

Blocks hold 16 tokens. Full prompt blocks are keyed by their chain hash, so a later request with
the same prefix finds them. A block is *in use* while a running request references it; when the
last reference goes, the block stays cached (evictable) until capacity is needed, oldest first.
Usage, as vLLM reports it, is the fraction of blocks in use.

With ``events`` on, the cache records what vLLM's KV events report (``kv_layouts.SimKvEvent``):
each run of blocks newly stored (hashes, the parent's hash, their token ids), each eviction and
each clear; the scheduler hands them to the publisher once per step (``take_events``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Allocation", "KvCache"]

_U64 = (1 << 64) - 1
"""vLLM's int block hashes are the low 64 bits of the digest, unsigned."""


@dataclass(slots=True)
class Allocation:
    """The blocks one request holds: shared prefix blocks by hash, plus private blocks."""

    hashes: list[int] = field(default_factory=list)
    private_blocks: int = 0
    hit_blocks: int = 0


class KvCache:
    """Fixed-capacity block pool; not thread-safe (one event loop owns it)."""

    def __init__(
        self, capacity_blocks: int, *, prefix_caching: bool = True, events: bool = False
    ) -> None:
        if capacity_blocks <= 0:
            raise ValueError("capacity_blocks must be positive")
        self.capacity = capacity_blocks
        self.prefix_caching = prefix_caching
        self.events: list[tuple[Any, ...]] | None = [] if events and prefix_caching else None
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self._private = 0

    @property
    def used_blocks(self) -> int:
        """Blocks referenced by running requests."""
        return len(self._refs) + self._private

    @property
    def cached_blocks(self) -> int:
        """Blocks kept only for reuse; evicted first when space is needed."""
        return len(self._evictable)

    @property
    def usage(self) -> float:
        """Fraction of capacity in use by running requests (0..1)."""
        return self.used_blocks / self.capacity

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are already cached (in use or evictable)."""
        if not self.prefix_caching:
            return 0
        hit = 0
        for h in hashes:
            if h not in self._refs and h not in self._evictable:
                break
            hit += 1
        return hit

    def take_events(self) -> list[tuple[Any, ...]]:
        """The events recorded since the last call (none when events are off)."""
        if not self.events:
            return []
        out, self.events = self.events, []
        return out

    def allocate(
        self,
        hashes: Sequence[int],
        *,
        total_blocks: int,
        max_hit_blocks: int,
        token_ids: Sequence[int] = (),
        block_size: int = 16,
    ) -> Allocation | None:
        """Reserve ``total_blocks`` for a request whose full prompt blocks are ``hashes``.

        Up to ``max_hit_blocks`` leading blocks are reused from the cache; the rest are new.
        Returns ``None`` (and changes nothing) when capacity is short even after evicting every
        evictable block, so the caller keeps the request waiting.
        """
        hit = min(self.match(hashes), max_hit_blocks)
        shared = list(hashes[:hit])
        # Reused blocks that are currently evictable come back into use and stop being free.
        revived = sum(1 for h in shared if h in self._evictable)
        fresh_hashed = [h for h in hashes[hit:] if self.prefix_caching]
        private = total_blocks - hit - len(fresh_hashed)
        needed = len(fresh_hashed) + private
        free = self.capacity - self.used_blocks - self.cached_blocks
        if needed > free + self.cached_blocks - revived:
            return None
        for h in shared:
            self._evictable.pop(h, None)
            self._refs[h] = self._refs.get(h, 0) + 1
        evicted = [self._evictable.popitem(last=False)[0] for _ in range(max(0, needed - free))]
        if evicted and self.events is not None:
            self.events.append(("removed", [h & _U64 for h in evicted]))
        taken: list[int] = []
        stored: list[int] = []
        for i, h in enumerate(fresh_hashed, start=hit):
            # A block past the reuse cap may still be cached, or repeat within one prompt: share.
            present = self._evictable.pop(h, 0) is None or h in self._refs
            self._refs[h] = self._refs.get(h, 0) + 1
            taken.append(h)
            if self.events is not None and token_ids:
                if present:
                    self._record_stored(stored, hashes, token_ids, block_size)
                    stored = []
                else:
                    stored.append(i)
        if stored:
            self._record_stored(stored, hashes, token_ids, block_size)
        self._private += private
        return Allocation(hashes=shared + taken, private_blocks=private, hit_blocks=hit)

    def release(self, allocation: Allocation) -> None:
        """Return a request's blocks; prefix blocks stay cached (most recently used last)."""
        for h in allocation.hashes:
            refs = self._refs[h] - 1
            if refs:
                self._refs[h] = refs
            else:
                del self._refs[h]
                self._evictable[h] = None
        self._private -= allocation.private_blocks
        allocation.hashes = []
        allocation.private_blocks = 0

    def clear(self) -> None:
        """Drop every cached block (a restart with a cold cache); in-use blocks stay counted."""
        self._evictable.clear()
        if self.events is not None:
            self.events.append(("cleared",))

    def _record_stored(
        self, run: list[int], hashes: Sequence[int], token_ids: Sequence[int], block_size: int
    ) -> None:
        """One ``BlockStored`` for blocks ``run`` (consecutive indexes into ``hashes``)."""
        if not run:
            return
        first, last = run[0], run[-1]
        parent = hashes[first - 1] & _U64 if first else None
        tokens = list(token_ids[first * block_size : (last + 1) * block_size])
        assert self.events is not None
        self.events.append(("stored", [hashes[i] & _U64 for i in run], parent, tokens))
