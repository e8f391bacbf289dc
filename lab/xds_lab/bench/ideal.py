"""The "ideal" reference policy: a picker with exact knowledge of the simulated fleet.

For each request the load generator asks the fleet's own process (``sim_probe``, which holds
every server's KV cache and queues) which server would give it the earliest first token, and
sends the request straight there: no Envoy, no control plane, no stale signal. It bounds what
any routing could do on this fleet; it is not something a gateway could run (it reads the
simulator's memory), and it bypasses Envoy, so its latency lacks Envoy's hop.

The estimate is the simulator's own cost model (``Profile``): the server's queued prompt
tokens plus this request's uncached ones, prefilled in steps of ``max_prefill_tokens``, each
step also paying a decode step for the running batch; times the server's slowdown. To it
goes the rule the product's picker follows (docs/picker.md): the prefill this server would
redo that the server with the longest cached prefix would not counts a second time (every
request behind it waits for it too). A server whose next decode step would break the TPOT
objective is chosen only if every server would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp

from xds_lab.loadgen.workloads import RequestSpec
from xds_lab.sim.profiles import Profile

__all__ = ["IdealRoute", "ServerView", "estimate", "pick"]


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server's exact state as it concerns one request."""

    name: str
    profile: Profile
    hit_tokens: int
    """Leading prompt tokens of this request already in the server's prefix cache."""
    queued_tokens: int
    """Prompt tokens of the requests waiting ahead of it."""
    running: int
    slowdown: float = 1.0


def estimate(view: ServerView, *, prompt_tokens: int) -> tuple[float, float]:
    """(time to first token, time per output token) in seconds were the request sent now."""
    p = view.profile
    work = view.queued_tokens + max(0, prompt_tokens - view.hit_tokens)
    steps = max(1, math.ceil(work / p.max_prefill_tokens))
    batch = min(view.running, p.max_num_seqs)
    slot_wait = max(0, view.running + 1 - p.max_num_seqs)  # each needs a finish first
    ttft = steps * (p.prefill_overhead_s + p.decode_time(batch)) + work * p.prefill_per_token_s
    ttft += slot_wait * p.decode_time(batch)
    return ttft * view.slowdown, p.decode_time(batch + 1) * view.slowdown


def _redone_s(view: ServerView, *, best_hit: int, prompt_tokens: int) -> float:
    """Seconds of prefill ``view`` would spend on what another server has cached."""
    redone = min(best_hit, prompt_tokens) - min(view.hit_tokens, prompt_tokens)
    return redone * view.profile.prefill_per_token_s * view.slowdown


def pick(views: Sequence[ServerView], *, prompt_tokens: int, tpot_s: float) -> str:
    """The server with the earliest first token, plus the prefill it redoes, among those
    that keep the TPOT objective (all of them if none does); ties go to the first listed."""
    if not views:
        raise ValueError("no server to pick from")
    best_hit = max(v.hit_tokens for v in views)
    scored = []
    for v in views:
        ttft, tpot = estimate(v, prompt_tokens=prompt_tokens)
        redone = _redone_s(v, best_hit=best_hit, prompt_tokens=prompt_tokens)
        scored.append((ttft + redone, tpot, v.name))
    keeping = [s for s in scored if s[1] <= tpot_s] or scored
    return min(keeping, key=lambda s: s[0])[2]


class IdealRoute:
    """A ``loadgen`` route: asks the fleet process's ``/lab/pick`` for every request."""

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession,
        control_url: str,
        addresses: dict[str, str],
        servers: Callable[[], list[str]],
        tpot_s: float,
    ) -> None:
        self._session = session
        self._url = control_url + "/lab/pick"
        self._addresses = addresses
        self._servers = servers
        self._tpot_s = tpot_s

    async def __call__(self, spec: RequestSpec) -> str:
        """The base URL of the best server for ``spec`` now."""
        body = {
            "path": spec.path,
            "body": spec.body,
            "servers": self._servers(),
            "tpot_s": self._tpot_s,
        }
        async with self._session.post(self._url, json=body) as resp:
            resp.raise_for_status()
            name = (await resp.json())["server"]
        return f"http://{self._addresses[name]}"
