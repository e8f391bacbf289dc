"""Rank a pool's servers for one request. Pure: the same inputs give the same order.

Each healthy server gets the **expected time to first token** of the request there, in the
unit "prompt tokens prefilled at the pool's fastest speed": the sum of named terms, each the
work (in prompt tokens) the request costs on that server, over the server's speed:

    (queued + uncached + redone + any term the caller adds) / speed

- *queued*: what the server has yet to prefill before this request (the caller's estimate:
  the picker's own unanswered assignments at their sizes, plus the rest of the engine's
  waiting count at the pool's mean prompt size);
- *uncached*: the prompt, minus what the index says the server holds of it (its longest run
  of the prompt's leading blocks);
- *redone*: the part of the prompt the best holder has cached and this server has not: work
  the pool would not do at all with the request on that holder. It counts ``move_cost``
  times in all (once as part of *uncached*) because it is not only this request's wait:
  every request queued behind it on this server waits for it too, it loads a second copy of
  the prefix into this server's cache, evicting others', and the prefix's later requests (a
  session's next turns) then find it split over two servers (counted once, the picker moved
  a prefix off its holder for any saving in this request's own wait, and lost more prefix
  hits than MAGLEV's hash);
- *speed*: the engine's capacity factor (its capacity over the pool's best) times its
  warm-up ramp, so a slow GPU class or a server still warming up takes longer per token.

A new signal (a LoRA adapter's affinity, a prefill/decode pair's transfer) is one more
``Term``: a function of the server, bound to its own data by the caller, that says the work it
adds in prompt tokens; ``rank`` takes it beside the three above (``terms``) and nothing else
changes. The terms are summed in the order named, then divided once by the speed.

The lowest cost goes first. So a server holding the prefix wins until its queue outweighs
``move_cost`` times the prefill it saves, and a long prompt goes to a fast server even past a
short queue. A holder whose engine weight times ``affinity`` is below the best server's loses
its claim to the prefix: the weight also carries KV use, SLO and health, and a server the
engine finds overloaded should not keep prefixes.

Equal costs (an idle pool, or a caller that knows no sizes) fall back to the longest holder,
then **weighted rendezvous hashing** on the template key: every server gets ``-weight / ln(u)`` with
``u`` a uniform hash of (key, address), highest first. A new prefix then lands on a server
with probability proportional to its weight (the engine's split, like MAGLEV's), the same
prefix lands on the same server while weights hold, and a server that leaves moves only its
own prefixes. The order past the first is the fallback list.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from xds_control.config.roles import Role
from xds_control.signals.sample import Adapters

__all__ = [
    "Candidate",
    "Ranking",
    "Term",
    "adapter_term",
    "costs",
    "prompt_terms",
    "queued_term",
    "rank",
    "redone_term",
    "uncached_term",
    "uncached_tokens",
]

_MIN_SPEED = 1e-3
"""A server the engine rates at nearly nothing is 1000x slower, not infinitely slow."""


class Candidate(NamedTuple):
    """A server the picker may name."""

    address: str
    """``IP:PORT``, as EDS publishes it (``override_host`` matches on it)."""
    weight: int
    """The engine's weight (1..100), or the static one with the engine off."""
    healthy: bool
    """Only healthy servers are named; the fallback policy copes with the rest."""
    speed: float = 1.0
    """Prefill speed relative to the pool's fastest, (0, 1]: capacity factor x warm-up."""
    waiting: float = 0.0
    """Requests the server reported waiting for a batch slot (engine's ``waiting``)."""
    observed_at: float | None = None
    """When ``waiting`` was read (Unix seconds); ``None``: never."""
    kv_usage: float | None = None
    """The engine's KV-cache usage (0..1); ``None``: not reported."""
    kv_observed_at: float | None = None
    """When ``kv_usage`` was read (Unix seconds)."""
    adapters: Adapters | None = None
    """Its LoRA adapters, as its engine last reported them; ``None``: not reported."""
    role: Role = Role.BOTH
    """Its part in a disaggregated pool: only a server that decodes is a request's destination,
    only one that prefills its prefill destination."""


def _draw(key: bytes, address: str) -> float:
    """A uniform number in (0, 1) from (key, address)."""
    digest = hashlib.blake2b(key + address.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 2)


def _rendezvous(key: bytes, candidate: Candidate) -> float:
    return -candidate.weight / math.log(_draw(key, candidate.address))


def _claims(
    healthy: Sequence[Candidate], cached: Mapping[str, float], affinity: float
) -> dict[str, float]:
    """``cached`` for the holders that keep their claim: weight times ``affinity`` at least the
    best healthy server's."""
    best = max((c.weight for c in healthy), default=0)
    return {
        c.address: cached[c.address]
        for c in healthy
        if c.address in cached and c.weight * affinity >= best
    }


def uncached_tokens(*, tokens: float, cached: float) -> float:
    """What a server prefills of a prompt of ``tokens`` when it holds ``cached`` tokens of it:
    the rest (none when the index credits more than the prompt)."""
    return tokens - min(tokens, cached)


class Term(Protocol):
    """One named part of a request's cost on a server: the work it adds there, in prompt
    tokens at the pool's fastest speed (``costs`` divides the sum by the server's speed).
    Pure; bound by its maker to the data it reads."""

    def __call__(self, candidate: Candidate, /) -> float: ...


def queued_term(queued: Mapping[str, float]) -> Term:
    """*queued*: the tokens ahead of the request on each server (none where not listed)."""
    return lambda c: queued.get(c.address, 0.0)


def uncached_term(*, tokens: float, cached: Mapping[str, float]) -> Term:
    """*uncached*: what the server prefills of the request's ``tokens``, ``cached[address]``
    of them held there."""
    return lambda c: uncached_tokens(tokens=tokens, cached=min(tokens, cached.get(c.address, 0.0)))


def redone_term(*, tokens: float, cached: Mapping[str, float], move_cost: float) -> Term:
    """*redone*: the prefix the best holder has cached and this server has not, counted
    ``move_cost`` times in all (once already as *uncached*, hence ``move_cost - 1``)."""
    best = min(tokens, max(cached.values(), default=0.0))
    return lambda c: (move_cost - 1.0) * (best - min(tokens, cached.get(c.address, 0.0)))


def adapter_term(*, adapter: str, load: float, full: float) -> Term:
    """*adapter*: the wait for a request's LoRA ``adapter`` on each server, in prompt tokens:

    - 0 where its requests are running (the adapter is on the GPU);
    - ``load`` where it is not but a slot is free (fewer running adapters than ``max_lora``),
      whether or not requests wait for it there: the load takes that long;
    - ``full / 2`` where every slot holds an adapter in use and requests for this one already
      wait there: the request joins the load the next free slot takes;
    - ``full`` where every slot holds an adapter in use: it waits for one to drain;
    - ``load`` where the server reports no adapters (it has loaded none yet).

    The reference is llm-d's endpoint picker, which scores a server 1.0 running, 0.8 room,
    0.6 waiting, 0 full and adds the score to its others by weight: the same order, except
    that a waiting adapter with a free slot is about to load and costs what room does, and
    these are costs in the ranking's unit, so a short queue on a server that must load the
    adapter can still beat a long one where it runs, and a full server is taken when every
    server is full and its queue is the shortest."""

    def cost(c: Candidate) -> float:
        held = c.adapters
        if held is None:
            return load
        if adapter in held.running:
            return 0.0
        if not held.full:
            return load
        return full / 2 if adapter in held.waiting else full

    return cost


def prompt_terms(
    *,
    tokens: float,
    cached: Mapping[str, float],
    queued: Mapping[str, float],
    move_cost: float,
) -> dict[str, Term]:
    """The expected time to first token's three terms, in the order they are summed."""
    return {
        "queued": queued_term(queued),
        "uncached": uncached_term(tokens=tokens, cached=cached),
        "redone": redone_term(tokens=tokens, cached=cached, move_cost=move_cost),
    }


def costs(candidates: Sequence[Candidate], *, terms: Mapping[str, Term]) -> dict[str, float]:
    """Address -> cost of each of ``candidates``: the sum of ``terms`` there, in their order,
    over the server's speed."""
    out = {}
    for c in candidates:
        work = 0.0
        for term in terms.values():
            work += term(c)
        out[c.address] = work / max(c.speed, _MIN_SPEED)
    return out


@dataclass(frozen=True, slots=True)
class Ranking:
    """One request's order of servers and the figures it was decided by."""

    order: list[str]
    """Up to ``count`` addresses, best first; empty when no server is healthy."""
    cached: dict[str, float]
    """Address -> tokens credited as cached there (holders that kept their claim)."""
    cost: dict[str, float]
    """Address -> cost of every healthy server (``costs``)."""


def rank(
    candidates: Sequence[Candidate],
    *,
    key: bytes,
    affinity: float,
    move_cost: float,
    count: int,
    cached: Mapping[str, float] | None = None,
    tokens: float = 0.0,
    queued: Mapping[str, float] | None = None,
    terms: Mapping[str, Term] | None = None,
) -> Ranking:
    """Up to ``count`` addresses of healthy ``candidates``, best first, for a request of
    ``tokens`` with template ``key``, of which ``cached[address]`` tokens are cached there,
    with ``queued`` tokens ahead on each server (``move_cost``: see ``redone_term``), and the
    credit and costs that decided it. ``terms``: further terms of the cost, after the
    prompt's three (``prompt_terms``).
    Without sizes (the defaults) every cost is 0: the longest holder, then rendezvous. The
    order is empty when no server is healthy: the caller then names none and Envoy's
    fallback policy decides."""
    healthy = [c for c in candidates if c.healthy and c.weight > 0]
    claimed = _claims(healthy, cached or {}, affinity)
    summed = prompt_terms(tokens=tokens, cached=claimed, queued=queued or {}, move_cost=move_cost)
    cost = costs(healthy, terms={**summed, **(terms or {})})
    ordered = sorted(
        healthy,
        key=lambda c: (
            cost[c.address],
            -claimed.get(c.address, 0.0),
            -_rendezvous(key, c),
        ),
    )
    return Ranking(order=[c.address for c in ordered[:count]], cached=claimed, cost=cost)
