"""Which blocks each server has cached, as its KV-cache events say: the picker's index from
events.

Blocks are keyed by their token content with the picker's own chain (``token_keys``): block
``i``'s key covers every token id up to the end of block ``i``. A ``BlockStored`` names the
engine's hashes, its parent's hash and the token ids; its keys are recomputed from the parent's
key (the prompt's first block when there is no parent) and the tokens, so the engine's own
hash, its seed and its algorithm never need to match ours. The engine's hashes are kept per
server only to follow its ``BlockRemoved``.

Left out, because a prompt's tokens alone cannot match them: blocks whose hash covers more than
their tokens (a LoRA adapter, ``extra_keys``), blocks whose parent this index never learned (a
subscriber that joined late), blocks of another medium than the GPU and of another KV-cache
group than the first. Pure: events in, lookups out; a ``KvSink``.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence

from xds_control.picker.index import LeadingRuns
from xds_control.picker.prefix import BlockKey, chain_keys
from xds_control.signals.kv_wire import AllCleared, BlockHash, BlocksRemoved, BlocksStored, KvEvent

__all__ = ["CachedBlocks", "CachedPrefix", "token_keys"]

_ROOT: BlockKey = 0


def token_keys(
    token_ids: Sequence[int], *, block_size: int, parent: BlockKey = _ROOT
) -> list[BlockKey]:
    """Chained keys of the full ``block_size`` blocks of ``token_ids`` (the partial last block
    has none: engines cache only full blocks), continuing from ``parent``'s key."""
    # One byte string, not one per block: picks cut 16k-token prompts.
    return chain_keys(array("Q", token_ids).tobytes(), step=block_size * 8, parent=parent)


class CachedPrefix:
    """The servers that hold a prompt's leading blocks, followed as its ids are read, so that
    a pick encodes the prompt only as far as some server holds it (``read`` answers a
    tokenizer's ``wanted``). ``matched`` is ``CachedBlocks.matched`` of every id read."""

    def __init__(self, holders: Mapping[BlockKey, set[str]], *, block_size: int) -> None:
        self._holders = holders
        self.block_size = block_size
        self._read = 0
        self._parent = _ROOT
        self._runs = LeadingRuns()

    @property
    def ended(self) -> bool:
        """A block no server holds was read: no id after it can match."""
        return self._runs.ended

    def read(self, ids: Sequence[int]) -> bool:
        """Follow ``ids`` (the prompt's first ids: each call the same ones or more) past what
        was read; whether some server holds every full block so far, so that the ids after
        them may match too."""
        full = (len(ids) - self._read) // self.block_size * self.block_size
        if self.ended or full <= 0:
            return not self.ended
        chunk = ids[self._read : self._read + full]
        keys = token_keys(chunk, block_size=self.block_size, parent=self._parent)
        self._read += full
        self._parent = keys[-1]
        return all(self._runs.step(self._holders.get(key)) for key in keys)  # stops at the end

    def matched(self) -> dict[str, int]:
        """Server -> how many leading blocks of the ids read it holds (holding none: absent)."""
        return self._runs.counts()


class CachedBlocks:
    """Every server's blocks; ``apply`` follows one server's events in order."""

    def __init__(self) -> None:
        self._by_hash: dict[str, dict[BlockHash, BlockKey]] = {}
        self._holders: dict[BlockKey, set[str]] = {}
        self.block_size: int | None = None
        """The block size of the last ``BlockStored``: what a prompt is cut into."""
        self.skipped = 0
        """Blocks left out (see the module's docstring)."""

    def __len__(self) -> int:
        return len(self._holders)

    def publishes(self, server: str) -> bool:
        """Whether ``server`` has sent events (since it was last forgotten)."""
        return server in self._by_hash

    def cached(self, server: str) -> int:
        """How many of ``server``'s blocks this index keys."""
        return len(self._by_hash.get(server, ()))

    def prefix(self, *, block_size: int) -> CachedPrefix:
        """A prompt's match, followed as its ids are read."""
        return CachedPrefix(self._holders, block_size=block_size)

    def matched(self, keys: Sequence[BlockKey]) -> dict[str, int]:
        """Server -> how many leading ``keys`` its events say it holds (servers holding none
        are absent)."""
        runs = LeadingRuns()
        for key in keys:
            if not runs.step(self._holders.get(key)):
                break
        return runs.counts()

    def apply(self, server: str, events: Sequence[KvEvent]) -> None:
        """Follow ``server``'s events."""
        by_hash = self._by_hash.setdefault(server, {})
        for event in events:
            if isinstance(event, BlocksStored):
                self._stored(server, by_hash, event)
            elif isinstance(event, BlocksRemoved):
                if _counted(event.medium, event.group_idx):
                    for h in event.block_hashes:
                        self._drop(server, by_hash.pop(h, None))
            elif isinstance(event, AllCleared):
                self._clear(server, by_hash)

    def forget(self, server: str) -> None:
        """``server`` left: nothing of it is claimed any more."""
        self._clear(server, self._by_hash.pop(server, {}))

    def _stored(self, server: str, by_hash: dict[BlockHash, BlockKey], event: BlocksStored) -> None:
        parent_hash = event.parent_block_hash
        parent = _ROOT if parent_hash is None else by_hash.get(parent_hash)
        usable = event.keyed_by_tokens_alone and _counted(event.medium, event.group_idx)
        if parent is None or not usable:
            self.skipped += len(event.block_hashes)
            return
        try:
            keys = token_keys(event.token_ids, block_size=event.block_size, parent=parent)
        except OverflowError:  # a token id no uint64 holds: not a real token
            self.skipped += len(event.block_hashes)
            return
        self.block_size = event.block_size
        for engine_hash, key in zip(event.block_hashes, keys, strict=False):
            self._drop(server, by_hash.get(engine_hash))
            by_hash[engine_hash] = key
            self._holders.setdefault(key, set()).add(server)

    def _drop(self, server: str, key: BlockKey | None) -> None:
        if key is None:
            return
        holders = self._holders.get(key)
        if holders is not None:
            holders.discard(server)
            if not holders:
                del self._holders[key]

    def _clear(self, server: str, by_hash: dict[BlockHash, BlockKey]) -> None:
        for key in by_hash.values():
            self._drop(server, key)
        by_hash.clear()


def _counted(medium: str | None, group_idx: int | None) -> bool:
    """Blocks in GPU memory of the first KV-cache group: what spares a prefill."""
    return medium in (None, "GPU") and group_idx in (None, 0)
