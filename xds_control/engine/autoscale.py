"""A replica recommendation per pool, from its request rate and GPU memory use.

Pure, like the weight engine: ``now`` is a parameter and the state a pool's next cycle needs
(the recent desired counts) travels in the returned ``Recommendation``; pass it back as
``previous``. The control plane only recommends; an HPA or KEDA reads the exported number.

One cycle, in phases:

1. **desired**: the count the load calls for now. The request rate asks for
   ``ceil(rate / qps_per_replica)``, or ``current`` when the rate is within ``tolerance`` of
   what ``current`` replicas serve; GPU memory asks for ``ceil(current * use / target)``. The
   larger wins, so the pool scales out when either is over its threshold and in only when both
   are under.
2. **stabilise** (the HPA's algorithm): scale out only to the *lowest* desired count of the last
   ``scale_up_window_s``, in only to the *highest* of the last ``scale_down_window_s``. A
   move in one direction needs the load to have asked for it during a whole window, so the
   recommendation cannot go up, down and up again within the windows.
3. **step**: at most ``max_step`` away from the current count, within min/max replicas.
4. **hold**: no scale-out beyond what was already recommended while any of the newest replicas
   is unhealthy or misses its P95 TTFT target: if the last ones added do not work yet, more of
   them will not help either (gradient scale-out with a circuit breaker).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xds_control.config import Pool
from xds_control.config.autoscale import AutoscalePolicy
from xds_control.discovery import Health
from xds_control.engine.decision import WeightDecision
from xds_control.signals import Signal

__all__ = ["P95", "PoolLoad", "Recommendation", "pool_load", "recommend", "recommend_pools"]

P95 = 0.95
"""A replica meets its P95 TTFT target when this share of its requests meets the TTFT target."""


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """What the recommendation reads of a pool in one cycle."""

    replicas: int
    """Endpoints discovered now: the current count."""
    request_rate: float | None
    """Requests per second summed over the replicas with a fresh reading; ``None``: none has."""
    gpu_memory: float | None
    """Mean GPU memory use (0..1) over the replicas with a fresh reading; ``None``: none has."""
    lagging: tuple[str, ...] = ()
    """The newest replicas that are unhealthy or miss their P95 TTFT target."""


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One pool's recommended replica count, why, and the state the next cycle needs."""

    replicas: int
    current: int
    desired: int
    """What the load called for this cycle, before stabilisation, step and hold."""
    reason: str
    load: PoolLoad
    history: tuple[tuple[float, int], ...]
    """(time, desired) within the longer window, oldest first."""
    computed_at: float

    def to_json(self) -> dict[str, Any]:
        """The recommendation as the admin API shows it."""
        return {
            "recommended_replicas": self.replicas,
            "current_replicas": self.current,
            "desired_replicas": self.desired,
            "reason": self.reason,
            "request_rate": self.load.request_rate,
            "gpu_memory_used": self.load.gpu_memory,
            "lagging": list(self.load.lagging),
            "computed_at": self.computed_at,
        }


def recommend_pools(
    *,
    pools: Sequence[Pool],
    decisions: Mapping[str, Sequence[WeightDecision]],
    previous: Mapping[str, Recommendation],
    now: float,
) -> dict[str, Recommendation]:
    """A recommendation for every pool with ``autoscale.enabled``, from its weight decisions."""
    out: dict[str, Recommendation] = {}
    for pool in pools:
        policy = pool.autoscale
        if not policy.enabled:
            continue
        load = pool_load(
            decisions=decisions.get(pool.name, ()),
            now=now,
            stale_after_s=pool.weights.stale_after_s,
            newest_window_s=policy.newest_window_s,
        )
        out[pool.name] = recommend(
            policy=policy, load=load, previous=previous.get(pool.name), now=now
        )
    return out


def pool_load(
    *, decisions: Sequence[WeightDecision], now: float, stale_after_s: float, newest_window_s: float
) -> PoolLoad:
    """The pool's load from its endpoints' decisions (their samples, health, first sight)."""
    since = now - stale_after_s
    rates: list[float] = []
    memory: list[float] = []
    lagging: list[str] = []
    for decision in decisions:
        sample = decision.explanation.sample
        readings = sample.readings if sample is not None else {}
        fresh = {s: r.value for s, r in readings.items() if r.observed_at >= since}
        if Signal.REQUEST_RATE in fresh:
            rates.append(fresh[Signal.REQUEST_RATE])
        if Signal.GPU_MEMORY_USED in fresh:
            memory.append(fresh[Signal.GPU_MEMORY_USED])
        first_seen_at = decision.state.first_seen_at
        newest = first_seen_at is not None and now - first_seen_at < (newest_window_s)
        slo = fresh.get(Signal.SLO_TTFT)
        if newest and (decision.health is not Health.HEALTHY or slo is None or slo < P95):
            lagging.append(decision.address)
    return PoolLoad(
        replicas=len(decisions),
        request_rate=sum(rates) if rates else None,
        gpu_memory=sum(memory) / len(memory) if memory else None,
        lagging=tuple(lagging),
    )


def recommend(
    *, policy: AutoscalePolicy, load: PoolLoad, previous: Recommendation | None, now: float
) -> Recommendation:
    """This cycle's recommendation for one pool (phases in the module docstring).

    The first cycle (``previous`` is ``None``) starts the history with the current count, so
    a process that just started watches the load for a window before it moves either way."""
    current = _clamp(load.replicas, policy)
    desired, why = _desired(policy, load, current=current)
    keep = max(policy.scale_up_window_s, policy.scale_down_window_s)
    history = previous.history if previous is not None else ((now, current),)
    history = (*(h for h in history if now - h[0] <= keep), (now, desired))
    replicas, moved = _stabilise(history, policy, current=current, now=now)
    pending = previous.replicas if previous is not None else current
    replicas, held = _hold(replicas, lagging=load.lagging, current=current, pending=pending)
    return Recommendation(
        replicas=_clamp(replicas, policy),
        current=load.replicas,
        desired=desired,
        reason=why + moved + held,
        load=load,
        history=history,
        computed_at=now,
    )


def _stabilise(
    history: tuple[tuple[float, int], ...], policy: AutoscalePolicy, *, current: int, now: float
) -> tuple[int, str]:
    """Out to the lowest desired count of the up window, in to the highest of the down window,
    at most ``max_step`` away from ``current``; and what moved it."""
    up_window, down_window = policy.scale_up_window_s, policy.scale_down_window_s
    up = min(d for t, d in history if now - t <= up_window)
    down = max(d for t, d in history if now - t <= down_window)
    if up > current:
        out = min(up, current + policy.max_step)
        return out, f"; out to {out} (lowest of the last {up_window:g} s: {up})"
    if down < current:
        into = max(down, current - policy.max_step)
        return into, f"; in to {into} (highest of the last {down_window:g} s: {down})"
    return current, ""


def _hold(
    replicas: int, *, lagging: tuple[str, ...], current: int, pending: int
) -> tuple[int, str]:
    """No more than already asked for (``pending``, or ``current`` if higher) while any of the
    newest replicas lag."""
    ceiling = max(current, min(pending, replicas))
    if replicas <= ceiling or not lagging:
        return replicas, ""
    return ceiling, (
        f"; held at {ceiling}: newest replicas miss P95 TTFT or are unhealthy"
        f" ({', '.join(lagging)})"
    )


def _clamp(replicas: int, policy: AutoscalePolicy) -> int:
    return min(max(replicas, policy.min_replicas), policy.max_replicas)


def _desired(policy: AutoscalePolicy, load: PoolLoad, *, current: int) -> tuple[int, str]:
    """The count the load calls for, and which signal called for it."""
    asks: list[tuple[int, str]] = []
    if load.request_rate is not None:
        ratio = load.request_rate / (current * policy.qps_per_replica)
        count = _ceil(load.request_rate / policy.qps_per_replica)
        asks.append((_within(count, ratio, current, policy), f"{load.request_rate:.3g} req/s"))
    if load.gpu_memory is not None:
        # No tolerance band: a gauge near 1 has no room above the target for one.
        count = _ceil(current * load.gpu_memory / policy.gpu_memory_target)
        asks.append((count, f"GPU memory {load.gpu_memory:.0%}"))
    if not asks:
        return current, "no request rate or GPU memory reading: current count"
    count, what = max(asks)
    return _clamp(count, policy), f"{what} calls for {count}"


def _ceil(value: float) -> int:
    # 4 * 0.95 / 0.95 may come out a hair above 4; that must not ask for a fifth replica.
    return math.ceil(value - 1e-9)


def _within(count: int, ratio: float, current: int, policy: AutoscalePolicy) -> int:
    """``current`` when ``ratio`` is within the tolerance of 1, else ``count``."""
    return current if abs(ratio - 1.0) <= policy.tolerance else count
