"""The picker's memory of where each prompt block went: block hash -> the last few servers it
sent a prompt holding that block to; bounded, least recently used blocks forgotten first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Hashable, Sequence

__all__ = ["HOLDERS", "LeadingRuns", "PrefixIndex"]

HOLDERS = 4
"""Servers remembered per block, most recent first. A prefix the picker moved off a busy
server stays known on both (the next move can land on a server that has it), and a popular
system prompt on several; older holders have likely evicted it by now."""


class LeadingRuns:
    """Each server's run of a prompt's leading blocks, followed block by block: a server's run
    lasts while it is among the holders of every block so far, and the match ends at the first
    block none of the servers still in it holds. Both indexes (where the picker sent prompts,
    and what the servers' events say they hold) match so."""

    def __init__(self) -> None:
        self._alive: set[str] | None = None
        self._last: Collection[str] | None = None
        self._left: dict[str, int] = {}
        self.blocks = 0
        """Blocks matched by some server so far."""
        self.ended = False
        """A block none of them holds was stepped on: no later block can match."""

    def step(self, holders: Collection[str] | None) -> bool:
        """The next block's holders (``None``: nobody's); whether the match goes on."""
        if self.ended:
            return False
        # A run of blocks sent to the same servers shares one tuple of holders, and a block
        # every server still in the match holds narrows nothing: neither is intersected.
        if self._alive is None:
            self._alive, self._last = set(holders or ()), holders
        elif holders is not self._last:
            self._last = holders
            if not self._alive.issubset(holders or ()):
                narrowed = self._alive.intersection(holders or ())
                self._left.update((s, self.blocks) for s in self._alive - narrowed)
                self._alive = narrowed
        if not self._alive:
            self.ended = True
            return False
        self.blocks += 1
        return True

    def counts(self) -> dict[str, int]:
        """Server -> how many leading blocks it holds (holding none: absent)."""
        out = dict(self._left)
        out.update((s, self.blocks) for s in self._alive or ())
        return out


class PrefixIndex:
    """Approximate by design: a server may have evicted a block since, and a prompt another
    Envoy's picker placed is unknown; the cost of a wrong entry is one prefill, never a failed
    request."""

    def __init__(self, *, capacity: int) -> None:
        self.capacity = capacity
        self._holders: OrderedDict[Hashable, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._holders)

    def matched(self, blocks: Sequence[Hashable]) -> dict[str, int]:
        """Address -> how many leading ``blocks`` the picker sent it (servers holding none are
        absent); the blocks looked at count as used."""
        runs = LeadingRuns()
        for block in blocks:
            holders = self._holders.get(block)
            if holders is None:
                break
            self._holders.move_to_end(block)
            if not runs.step(holders):
                break
        return runs.counts()

    def put(self, blocks: Sequence[Hashable], address: str) -> None:
        """Remember that a prompt of ``blocks`` went to ``address``; forget the least recently
        used blocks past the capacity."""
        holders = self._holders
        last: tuple[str, ...] | None = None
        mine: tuple[str, ...] = ()
        for block in blocks:
            found = holders.get(block, ())
            if found is not last:  # a run of blocks with the same holders gets one new tuple
                last = found
                if found[:1] == (address,):
                    mine = found
                else:
                    others = tuple(a for a in found if a != address)
                    mine = (address, *others[: HOLDERS - 1])
            holders[block] = mine
            holders.move_to_end(block)
        while len(holders) > self.capacity:
            holders.popitem(last=False)
