"""The picker's memory of where each prompt block went: block hash -> the last few servers it
sent a prompt holding that block to; bounded, least recently used blocks forgotten first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

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
        self._holders: OrderedDict[bytes, tuple[str, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._holders)

    def matched(self, blocks: Sequence[bytes]) -> dict[str, int]:
        """Address -> how many leading ``blocks`` the picker sent it (servers holding none are
        absent); the blocks looked at count as used."""
        out: dict[str, int] = {}
        alive: set[str] | None = None
        for n, block in enumerate(blocks, start=1):
            holders = self._holders.get(block)
            if holders is None:
                break
            self._holders.move_to_end(block)
            alive = set(holders) if alive is None else alive.intersection(holders)
            if not alive:
                break
            for address in alive:
                out[address] = n
        return out

    def put(self, blocks: Sequence[bytes], address: str) -> None:
        """Remember that a prompt of ``blocks`` went to ``address``; forget the least recently
        used blocks past the capacity."""
        for block in blocks:
            others = tuple(a for a in self._holders.get(block, ()) if a != address)
            self._holders[block] = (address, *others[: HOLDERS - 1])
            self._holders.move_to_end(block)
        while len(self._holders) > self.capacity:
            self._holders.popitem(last=False)
