"""A server that dies and comes back, and a server that hangs, under steady load with the
weight engine scraping the fleet directly. What a user loses is counted; the engine marks the
server unhealthy within a bounded time (Envoy then sends it nothing new) and ramps it up when
it is back; the routes' default retries move what the failed server had not begun to answer."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.engine_stack import SimStack, engine_config
from e2e.stack import eventually
from fault.fleet import fault_stack
from fault.load import SteadyLoad
from fault.report import record
from xds_lab.harness.pool_config import POOL
from xds_lab.sim.faults import FaultUpdate

pytestmark = [pytest.mark.fault, pytest.mark.e2e]

SCRAPE_S = 0.5
SIGNALS = {"scrape": {"enabled": True, "interval_s": SCRAPE_S}, "reconcile_period_s": 0.5}
WARMUP_S = 8.0
"""Not shorter: the weight falls at most ``max_step`` a cycle, and with a 5 s warm-up the ramp
was back up before it had dipped below 0.6 of its end (a run saw 65, 50, 60, 75)."""
WEIGHTS = {"warmup_s": WARMUP_S, "settle_s": 2.0}
DOWN_S = 6.0
DETECT_BOUND_S = 5.0
"""3 failed scrapes (``unhealthy_after_failures``) at 0.5 s, a scrape timeout, a reconcile
period and the push: well under this."""
VICTIM = "s3"
RAMP_SLACK_S = 12.0
"""How long past the warm-up its weight may still be climbing back when the ramp is watched."""
IN_FLIGHT = 5
"""More than a server has in flight at this load: 20 requests/s over four servers, each
answered within a few hundred milliseconds."""


async def settle(stack: SimStack) -> dict[str, int]:
    """Envoy's weights once they have held still for 3 s."""
    steady: list[dict[str, int]] = []

    async def still() -> bool:
        steady.append(await stack.envoy_weights())
        recent = steady[-15:]
        return len(recent) == 15 and all(r == recent[-1] for r in recent)

    await eventually(still, timeout=40, what="weights that hold still")
    return steady[-1]


async def health_of(stack: SimStack, server: str) -> str:
    return (await stack.envoy_hosts())[server].health


def lost_bound(load: SteadyLoad, before: dict[str, int], detect_s: float) -> float:
    """Most requests a failed server can take down: what it held, and twice its share of
    the requests sent until it was marked."""
    share = before[VICTIM] / sum(before.values())
    return IN_FLIGHT + 2 * share * load.rate * detect_s


RETRY_STATS = (
    "upstream_cx_connect_fail",
    "upstream_rq_retry",
    "upstream_rq_retry_success",
    "upstream_rq_retry_overflow",
    "upstream_rq_retry_limit_exceeded",
    "upstream_rq_pending_failure_eject",
)


@dataclass
class Crash:
    """What a server's crash and return looked like from Envoy."""

    killed: float
    """When (monotonic seconds)."""
    before: dict[str, int]
    detect_s: float
    """Until Envoy showed it unhealthy."""
    healthy_s: float
    """From its return until Envoy showed it healthy."""
    ramp: list[int]
    """Its weight in Envoy every 0.5 s from then on, through the warm-up."""
    reasons: list[str]
    """The engine's reason for its weight at each of those samples."""


async def crash_and_return(stack: SimStack) -> Crash:
    """Once the weights have settled, crash ``VICTIM`` for ``DOWN_S`` and watch it return."""
    server = stack.backends.servers[VICTIM]
    before = await settle(stack)
    killed = time.monotonic()
    crash = asyncio.create_task(server.update_faults(FaultUpdate(restart=DOWN_S)))

    async def unhealthy() -> bool:
        return await health_of(stack, VICTIM) != "HEALTHY"

    await eventually(unhealthy, timeout=15, what=f"{VICTIM} to be marked unhealthy")
    detect_s = time.monotonic() - killed
    await crash
    back = time.monotonic()

    async def healthy() -> bool:
        return await health_of(stack, VICTIM) == "HEALTHY"

    await eventually(healthy, timeout=15, what=f"{VICTIM} to be healthy again")
    healthy_s = time.monotonic() - back
    ramp: list[int] = []
    reasons: list[str] = []
    # Through the warm-up and 3 s more; then on while the weight is still climbing back to
    # its share (a loaded machine can start the ramp a few cycles late), for RAMP_SLACK_S.
    while (elapsed := time.monotonic() - back) < healthy_s + WARMUP_S + 3 or (
        elapsed < healthy_s + WARMUP_S + RAMP_SLACK_S and ramp[-1] < before[VICTIM] - 5
    ):
        ramp.append((await stack.envoy_weights())[VICTIM])
        reasons.append((await stack.decisions())[VICTIM]["reason"])
        await asyncio.sleep(0.5)
    return Crash(killed, before, detect_s, healthy_s, ramp, reasons)


def assert_ramped(crash: Crash) -> None:
    """Back at a fraction of its weight, then up to its share again."""
    seen = (crash.before, list(zip(crash.ramp, crash.reasons, strict=True)))
    assert min(crash.ramp) <= 0.6 * crash.ramp[-1], seen
    assert crash.ramp[-1] >= min(crash.ramp) + 20, seen


@pytest.mark.parametrize("retry", [False, True], ids=["no-retry", "retry"])
async def test_killed_server_is_marked_unhealthy_and_ramps_up_when_back(
    tmp_path: Path, retry: bool
) -> None:
    stack = fault_stack(tmp_path)
    try:
        config = engine_config(stack, signals=SIGNALS, weights=WEIGHTS)
        if not retry:
            config["listeners"][0]["routes"][0]["retry"] = None
        await stack.start(config)
        async with SteadyLoad(stack.url) as load:
            crash = await crash_and_return(stack)
        counts = load.counts()
        stats = await stack.envoy.stats()
        envoy_counts = {k: stats.get(f"cluster.chat.{k}", 0) for k in RETRY_STATS}
        late = [f for f in load.failures() if f.sent_at > crash.killed + crash.detect_s + 1.0]
        record(
            f"server killed, back after {DOWN_S:.0f} s ({'retry' if retry else 'retry: null'})",
            counts,
            recover_s=crash.detect_s,
            healthy_again_s=round(crash.healthy_s, 2),
            ramp=crash.ramp,
            before=crash.before,
            envoy=envoy_counts,
        )
        assert crash.detect_s < DETECT_BOUND_S, crash.detect_s
        # Losses, if any, are requests in flight on the server or sent before it was marked.
        assert not late, [
            (f.sent_at - crash.killed, f.result.error or f.result.status) for f in late
        ]
        # At most: what was in flight on it, and (twice, for Poisson arrivals) its share of what
        # was sent until it was marked.
        assert counts.failed <= lost_bound(load, crash.before, crash.detect_s), counts
        if retry:
            # Retried on another server, what never reached one is lost only when Envoy's
            # retry limits refuse the retry (the pool's retry budget: at least 3 in flight).
            refused = envoy_counts["upstream_rq_retry_overflow"]
            refused += envoy_counts["upstream_rq_retry_limit_exceeded"]
            assert counts.failed <= refused, (counts, envoy_counts)
        assert_ramped(crash)
    finally:
        await stack.close()


async def test_restarted_server_without_a_start_time_ramps_up(tmp_path: Path) -> None:
    stack = fault_stack(tmp_path, profiles=["triton-h100"] * 4)
    try:
        config = engine_config(stack, signals=SIGNALS, weights=WEIGHTS)
        config["pools"][0]["engine"] = "triton"
        await stack.start(config)
        # Under load: with no traffic its counters stay at 0 and a restart leaves no trace.
        async with SteadyLoad(stack.url):
            crash = await crash_and_return(stack)
        print(f"{VICTIM} before {crash.before[VICTIM]}, after its return {crash.ramp}")
        assert_ramped(crash)
    finally:
        await stack.close()


TRY_IDLE_S = 1.0
"""The streamed route's per-try idle timeout here: first tokens come within about 0.1 s (short
prompts on H100s); the default (60 s) waits for the longest prompt on the slowest GPU."""
STREAM_IDLE_S = 3.0
"""The streamed route's idle timeout (the listener's default is 300 s)."""
HUNG_ROUTES = [
    {
        "name": "streamed",
        "pool": POOL,
        "match": {"stream": True},
        "idle_timeout_s": STREAM_IDLE_S,
        "retry": {"per_try_idle_timeout_s": TRY_IDLE_S},
    },
    {"name": "all", "pool": POOL},
]
"""The route timeout stays at its default, 300 s: the tries' bounds must do the work."""
OUTLIER = {"consecutive_5xx": 3, "interval_s": 1.0, "base_ejection_time_s": 30.0}
HUNG_STATS = (
    "upstream_rq_per_try_idle_timeout",
    "upstream_rq_retry",
    "upstream_rq_retry_success",
    "upstream_rq_retry_overflow",
    "upstream_rq_retry_limit_exceeded",
)


async def test_hung_server_is_taken_out_by_health_and_its_requests_move_on(
    tmp_path: Path,
) -> None:
    stack = fault_stack(tmp_path)
    try:
        config = engine_config(stack, signals=SIGNALS, weights=WEIGHTS)
        config["pools"][0]["outlier_detection"] = OUTLIER
        config["listeners"][0].update(classify={}, routes=HUNG_ROUTES)
        await stack.start(config)
        server = stack.backends.servers[VICTIM]
        async with SteadyLoad(stack.url, streamed=True) as load:
            before = await settle(stack)
            hung = time.monotonic()
            await server.update_faults(FaultUpdate(hang=True))

            async def unhealthy() -> bool:
                return await health_of(stack, VICTIM) != "HEALTHY"

            await eventually(unhealthy, timeout=15, what=f"{VICTIM} to be marked unhealthy")
            detect_s = time.monotonic() - hung
            # Let every request caught on the hung server reach its bound.
            await asyncio.sleep(TRY_IDLE_S + STREAM_IDLE_S + OUTLIER["interval_s"] + 1)
            stats = await stack.envoy.stats()
            served_since = load.answered_by(VICTIM, since=hung + detect_s + 1.0)
            await server.clear_faults()
            cleared = time.monotonic()

            async def healthy() -> bool:
                return await health_of(stack, VICTIM) == "HEALTHY"

            await eventually(healthy, timeout=15, what=f"{VICTIM} to be healthy again")
            healthy_s = time.monotonic() - cleared
        counts = load.counts()
        failures = load.failures()
        ejections = stats.get(f"cluster.{POOL}.outlier_detection.ejections_enforced_total", 0)
        envoy_counts = {k: stats.get(f"cluster.{POOL}.{k}", 0) for k in HUNG_STATS}
        late = [f for f in failures if f.sent_at > hung + detect_s + 1.0]
        longest = max(o.result.e2e_s for o in load.outcomes)
        record(
            "server hangs (accepts, never answers), streamed load, default retries",
            counts,
            recover_s=detect_s,
            healthy_again_s=round(healthy_s, 2),
            ejections=ejections,
            envoy=envoy_counts,
            longest_s=round(longest, 2),
            started_and_lost=len(failures),
        )
        assert detect_s < DETECT_BOUND_S, detect_s
        assert not late, [(f.sent_at - hung, f.result.error or f.result.status) for f in late]
        assert served_since == 0
        # What the hung server had not begun to answer went to another server after one
        # per-try idle timeout: none of it is lost.
        assert all(f.result.ttft_s is not None for f in failures), failures
        assert envoy_counts["upstream_rq_per_try_idle_timeout"] >= 1, envoy_counts
        assert envoy_counts["upstream_rq_retry_success"] >= 1, envoy_counts
        # A stream it had begun cannot move: it ends when the server has been silent too long.
        # Nothing waits longer than the per-try idle and stream idle timeouts together.
        assert longest < TRY_IDLE_S + STREAM_IDLE_S, longest
        # The timeouts count as 5xx for outlier detection: Envoy ejects it on its own too.
        assert ejections >= 1, stats
        assert counts.failed <= lost_bound(load, before, detect_s), counts
    finally:
        await stack.close()
