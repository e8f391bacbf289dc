"""What one pick is made of, and what the picker remembers of a pool between picks. Pure:
the time comes as ``now``; the picker (``picker.py``) owns the clock, the metrics and the
log.

A ``Pick`` is the answer: the servers to name, best first. ``PoolMemory`` is a pool's
routing history (``PrefixIndex``), its open assignments (``Ledger``) and its mean prompt
size. ``queued_tokens`` and ``cached_tokens`` are two inputs of the ranking (``score.py``):
what waits ahead of a request on each server, and what each server has cached of its prompt.
``freshest`` is the servers' queue and KV use as last known: the engine's reading, or the
server's own report with its last response when that came later.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from xds_control.picker.index import PrefixIndex
from xds_control.picker.ledger import Ledger
from xds_control.picker.prefix import BLOCK_BYTES, Prompt
from xds_control.picker.score import Candidate, uncached_tokens
from xds_control.signals.reported_load import Reported

__all__ = [
    "ASSIGNMENT_MAX_AGE_S",
    "EventCredit",
    "Pick",
    "PoolMemory",
    "cached_tokens",
    "freshest",
    "queued_tokens",
]

ASSIGNMENT_MAX_AGE_S = 30.0
"""An assignment whose end the picker never heard of stops counting after this long (longer
than most requests, so it only matters when Envoy's stream end is lost)."""

_MEAN_WEIGHT = 0.05
"""Weight of each new prompt in the pool's running mean prompt size (about the last 20)."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One request's answer: the servers of its pool to name, best first (the first takes
    it, the rest are Envoy's fallbacks). Empty: nothing to pick on; Envoy's fallback policy
    decides (or, for a gateway, 503). In a disaggregated pool ``addresses`` are decode
    servers and ``prefill`` the server that prefills the prompt for them; ``None``: the
    first of ``addresses`` prefills it itself (aggregated, docs/disaggregation.md)."""

    addresses: tuple[str, ...] = ()
    prefill: str | None = None

    def __bool__(self) -> bool:
        return bool(self.addresses)


def queued_tokens(
    candidates: Sequence[Candidate],
    *,
    queue: Mapping[str, tuple[float, int]],
    mean_tokens: float,
) -> dict[str, float]:
    """Address -> prompt tokens ahead of a new request there: every prompt the picker sent it
    that it has not answered yet, each at its own size (``queue``: their tokens, and how many
    were sent before the server's last reading), and the rest of the ``waiting`` count of that
    reading (requests the picker did not send) at the pool's mean prompt size. One long
    prompt in a queue counts as long as it is, not as the mean."""
    out: dict[str, float] = {}
    for c in candidates:
        tokens, counted = queue.get(c.address, (0.0, 0))
        out[c.address] = tokens + max(0.0, c.waiting - counted) * mean_tokens
    return out


def freshest(
    candidates: Sequence[Candidate], *, reported: Callable[[str], Reported | None]
) -> list[Candidate]:
    """``candidates`` with each one's ``waiting`` and ``kv_usage`` (and their times) from the
    report its server sent with its last response (``reported(address)``) wherever that
    came after the engine's reading or the engine has none: the picker's view of a queue is
    then at most one response old. A report that names neither leaves the candidate as is."""
    out = []
    for c in candidates:
        last = reported(c.address)
        if last is not None:
            report, at = last
            if report.waiting is not None and (c.observed_at is None or at > c.observed_at):
                c = c._replace(waiting=report.waiting, observed_at=at)
            if report.kv_usage is not None and (c.kv_observed_at is None or at > c.kv_observed_at):
                c = c._replace(kv_usage=report.kv_usage, kv_observed_at=at)
        out.append(c)
    return out


@dataclass(frozen=True, slots=True)
class EventCredit:
    """What the servers' KV events say of one prompt (``CachedBlocks``): the leading blocks
    each holds (``matched``, in blocks of ``block_size`` tokens), the prompt's blocks sent to a
    server still prefilling them (``claims``, in the picker's ``BLOCK_BYTES`` blocks), and
    which servers' events decide (``decides``: it publishes them and they have not stopped)."""

    matched: Mapping[str, int]
    block_size: int
    claims: Mapping[str, int]
    decides: Callable[[str], bool]


def _tokens_of_blocks(prompt: Prompt, blocks: int) -> float:
    return min(prompt.tokens, blocks * BLOCK_BYTES / prompt.bytes_per_token)


def cached_tokens(
    prompt: Prompt,
    *,
    history: Mapping[str, int],
    events: EventCredit | None,
    without_cache: frozenset[str],
) -> dict[str, float]:
    """Address -> prompt tokens the server holds: from its KV events where they decide
    (``events``), else from where the picker sent prompts (``history``: leading blocks in the
    routing index); none on a server that keeps no prefix cache (``without_cache``)."""
    cached = {
        address: _tokens_of_blocks(prompt, blocks)
        for address, blocks in history.items()
        if address not in without_cache
    }
    if events is None:
        return cached
    for address in [a for a in cached if events.decides(a)]:
        del cached[address]
    for address, blocks in events.matched.items():
        if address not in without_cache and events.decides(address):
            cached[address] = min(prompt.tokens, blocks * events.block_size)
    # A prompt sent to a server that is still prefilling it is not in its events yet:
    # the next request with that prefix would find no holder and go elsewhere.
    for address, blocks in events.claims.items():
        if address not in without_cache and events.decides(address):
            cached[address] = max(cached.get(address, 0.0), _tokens_of_blocks(prompt, blocks))
    return cached


@dataclass
class PoolMemory:
    """What the picker remembers of one pool (a prefix on one pool's server says nothing
    about another pool's, nor does its queue)."""

    index: PrefixIndex
    ledger: Ledger = field(default_factory=lambda: Ledger(max_age_s=ASSIGNMENT_MAX_AGE_S))
    mean_tokens: float = 0.0

    def remember(
        self,
        prompt: Prompt,
        *,
        address: str,
        cached: float,
        request: Hashable | None,
        keeps_prefix: bool,
        now: float,
    ) -> None:
        """``prompt`` went to ``address``, which had ``cached`` tokens of it (``keeps_prefix``:
        the server has a prefix cache, so the index learns it holds the prompt now)."""
        if keeps_prefix:
            self.index.put(prompt.blocks, address)
        self.ledger.add(
            object() if request is None else request,
            address=address,
            tokens=uncached_tokens(tokens=prompt.tokens, cached=cached),
            now=now,
            # Only a request whose answer will be reported claims its blocks until then.
            blocks=prompt.blocks if request is not None else (),
        )
        mean = self.mean_tokens
        self.mean_tokens = (
            prompt.tokens if mean == 0.0 else mean + _MEAN_WEIGHT * (prompt.tokens - mean)
        )
