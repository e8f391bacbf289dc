"""The sequence numbers of one server's KV events: what to do with each message that arrives.

vLLM numbers its batches 0, 1, 2, ... per publisher, keeps the last ``buffer_steps`` of them
for replay, and starts again at 0 when the server restarts. A subscriber therefore sees:

- the next number: apply it;
- a number past the next (a gap: the PUB socket drops what a slow or absent subscriber misses):
  hold it, ask the replay socket for everything from the first missing one, apply what comes
  back in order, then what was held;
- a number at or below the last one the live stream brought: a new publisher, i.e. the server
  restarted. Its cache is empty, so this counts as ``AllBlocksCleared``, and numbers from 0 up
  to this one are asked for again;
- numbers already applied (a replay brought them first, or the replay repeats what the live
  stream brought) are duplicates: skipped.

A gap the replay cannot fill (its buffer has moved on, or it does not answer) means events
were lost: the server's blocks are cleared and rebuilt from what follows, since a lost
``BlockRemoved`` would leave a claim the server no longer backs. Pure: no clock, no IO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Step", "Tracker"]


class Step(StrEnum):
    """What the subscriber does with a message, as ``Tracker`` decides."""

    APPLY = "apply"
    """Apply it now."""
    HOLD = "hold"
    """Keep it until the replay in flight ends (``Tracker.replay_from`` says from where to
    ask, when a new request is needed)."""
    SKIP = "skip"
    """Already applied."""


@dataclass(slots=True)
class Tracker:
    """One server's sequence state."""

    last: int = -1
    """The last sequence number applied; -1: none yet."""
    live_last: int = -1
    """The last number the live stream brought; -1: none yet."""
    replay_from: int | None = None
    """The first missing number while a replay is wanted or in flight."""
    cleared: bool = False
    """Set when the server's blocks must be cleared before the next apply (a restart, a gap
    the replay did not fill); the subscriber resets it once done."""
    held: list[tuple[int, bytes]] = field(default_factory=list)
    """Live messages received while replaying, applied once the replay ends."""
    restarts: int = 0
    lost: int = 0
    """Messages known lost: gaps the replay did not fill."""

    def restart(self) -> None:
        """The server restarted (its numbers went back, or its health went down and up):
        its blocks are gone, and its numbers start again."""
        self.restarts += 1
        self.last = -1
        self.live_last = -1
        self.cleared = True
        self.held.clear()
        self.replay_from = None

    def live(self, seq: int, payload: bytes) -> Step:
        """A message on the live stream."""
        if seq <= self.live_last:
            # The live stream went back: another publisher, the server restarted.
            self.restart()
        self.live_last = seq
        if seq <= self.last:
            return Step.SKIP
        if self.replay_from is not None:
            self.held.append((seq, payload))
            return Step.HOLD
        if seq > self.last + 1:
            self.replay_from = self.last + 1
            self.held.append((seq, payload))
            return Step.HOLD
        self.last = seq
        return Step.APPLY

    def replayed(self, seq: int) -> Step:
        """A message from the replay socket."""
        if seq <= self.last:
            return Step.SKIP
        if seq > self.last + 1:
            # The replay's buffer no longer holds what was missed.
            self._lose(seq)
        self.last = seq
        return Step.APPLY

    def replay_ended(self) -> list[tuple[int, bytes]]:
        """The replay is over (its end marker, or no answer in time): the held messages to
        apply now, in order. Anything still missing before them is lost."""
        self.replay_from = None
        out: list[tuple[int, bytes]] = []
        for seq, payload in sorted(self.held):
            if seq <= self.last:
                continue
            if seq > self.last + 1:
                self._lose(seq)
            self.last = seq
            out.append((seq, payload))
        self.held.clear()
        return out

    def _lose(self, seq: int) -> None:
        """Numbers up to ``seq`` will never come: clear. Before the first message applied
        nothing was known, so nothing counts as lost."""
        if self.last >= 0:
            self.lost += seq - self.last - 1
        self.cleared = True
