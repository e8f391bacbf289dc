"""The picker's memory of where each prompt block went: block hash -> the last few servers it
sent a prompt holding that block to; bounded, least recently used blocks forgotten first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

__all__ = ["HOLDERS", "PrefixIndex"]

HOLDERS = 4
"""Servers remembered per block, most recent first. A prefix the picker moved off a busy
server stays known on both (the next move can land on a server that has it), and a popular
system prompt on several; older holders have likely evicted it by now."""


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
        out: dict[str, int] = {}
        alive: set[str] = set()
        last: tuple[str, ...] = ()
        n = 0
        for block in blocks:
            holders = self._holders.get(block)
            if holders is None:
                break
            self._holders.move_to_end(block)
            if holders is not last:  # a run of blocks sent to the same servers is one tuple
                narrowed = set(holders) if n == 0 else alive.intersection(holders)
                out.update((a, n) for a in alive - narrowed)
                alive, last = narrowed, holders
                if not alive:
                    break
            n += 1
        out.update((a, n) for a in alive)
        return out

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
