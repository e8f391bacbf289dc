"""The picker's memory of where each prefix went: bounded, least recently used forgotten
first."""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["PrefixIndex"]


class PrefixIndex:
    """Prefix key -> the address the picker last sent it to. Approximate by design: a server
    may have evicted the prefix since, and a prefix another Envoy's picker placed is unknown;
    the cost of a wrong entry is one prefill, never a failed request."""

    def __init__(self, *, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[bytes, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> str | None:
        """Where ``key`` last went; a hit counts as a use."""
        address = self._entries.get(key)
        if address is not None:
            self._entries.move_to_end(key)
        return address

    def put(self, key: bytes, address: str) -> None:
        """Remember that ``key`` went to ``address``; forget the least recently used key when
        full."""
        self._entries[key] = address
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def forget(self, address: str) -> None:
        """Drop every key held by ``address`` (it left the pool)."""
        for key in [k for k, a in self._entries.items() if a == address]:
            del self._entries[key]
