"""Measure a fleet's capacity: what an ideal balancer could serve.

Each distinct server kind (profile plus overrides) is ramped alone, straight to the server
(no Envoy), with the scenario's workload: the rate grows by ``STEP_FACTOR`` until the server
stops keeping up: judged on the second half of the step's arrivals, once a queue has had time
to build, fewer than ``KEEP_UP_SHARE`` of them met the SLO (``capacity_judge``). A kind's
capacity is the last rate that held; the fleet's is the sum over its servers. Kinds ramp side by
side, so the ramp costs as many steps as the slowest kind needs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from xds_lab.bench.capacity_judge import KEEP_UP_SHARE, keep_up_share
from xds_lab.bench.metrics import point_metrics
from xds_lab.bench.point import load_spec
from xds_lab.bench.scenario import FleetServer, Scenario
from xds_lab.bench.stack import BenchStack
from xds_lab.harness.errors import HarnessError
from xds_lab.loadgen import Slo, build_requests, run_load
from xds_lab.sim.profiles import get_profile

__all__ = ["STEP_FACTOR", "measure_capacity"]

_log = structlog.get_logger(__name__)
STEP_FACTOR = 1.3
_MAX_STEPS = 10
_MIN_REQUESTS = 40
"""Per step, so the judged second half holds about 20 requests: one may miss at 95%."""
_MAX_DESCENTS = 3
"""A kind that misses the SLO at 1/5 of the first guess misses it unloaded (a slow GPU on long
prompts): it counts as zero rather than ramping down for minutes."""


def _kind(server: FleetServer) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(server.overrides.items()))
    return f"{server.profile}[{extra}]" if extra else server.profile


def _first_rate(server: FleetServer, scenario: Scenario) -> float:
    """Half of what prefill alone allows (simulated req/s): a safe start for the ramp."""
    profile = get_profile(server.profile, **server.overrides)
    work = scenario.workload
    if work.get("workload") == "shared-prefix":
        # Start as if every system prompt were cold: the ramp then climbs, which is cheap,
        # rather than starting far above capacity and descending, which is not.
        prompt = float(work.get("system_tokens", 1024)) + float(work.get("question_tokens", 64))
    else:
        prompt = float(work.get("input_mean", 730))
    return 0.5 / profile.prefill_time(round(prompt))


async def _step(
    stack: BenchStack, *, scenario: Scenario, server: str, rate_sim: float, seed: int
) -> bool:
    ts = scenario.time_scale
    # At least _MIN_REQUESTS per step, so a slow server's step is not decided by three requests.
    seconds = min(
        max(scenario.capacity_step_s, _MIN_REQUESTS / rate_sim), 4 * scenario.capacity_step_s
    )
    spec = load_spec(scenario, rate_rps=rate_sim / ts, seconds=seconds * ts, seed=seed)
    plan = build_requests(spec)
    url = f"http://{stack.backends.addresses[server]}"
    run = await run_load(url, plan, timeout_s=scenario.request_timeout_s * ts)
    slo = Slo(ttft_s=scenario.slo.ttft_s, tpot_s=scenario.slo.tpot_s)
    span = plan[-1].at if plan else 1.0
    m = point_metrics(run.results, duration_s=span, slo=slo, time_scale=ts)
    wall_slo = Slo(ttft_s=scenario.slo.ttft_s * ts, tpot_s=scenario.slo.tpot_s * ts)
    share = keep_up_share(run.results, window_s=span, slo=wall_slo)
    held = share >= KEEP_UP_SHARE and m["timeouts"] == 0
    _log.info(
        "capacity step",
        server=server,
        rate=round(rate_sim, 2),
        held=held,
        second_half_kept_up=round(share, 3),
        goodput=round(m["goodput_rps"], 2),
        ttft_p90=m["ttft_p90_s"],
    )
    return held


async def measure_capacity(stack: BenchStack, *, scenario: Scenario) -> dict[str, Any]:
    """Per kind: capacity in simulated req/s and the rates tried; and the fleet's total."""
    kinds: dict[str, FleetServer] = {}
    for server in scenario.fleet:
        if not server.late:
            kinds.setdefault(_kind(server), server)
    rates = {k: _first_rate(s, scenario) for k, s in kinds.items()}
    held: dict[str, float] = dict.fromkeys(kinds, 0.0)
    tried: dict[str, list[tuple[float, bool]]] = {k: [] for k in kinds}
    active = set(kinds)
    for step in range(_MAX_STEPS):
        if not active:
            break
        names = sorted(active)
        outcomes = await asyncio.gather(
            *(
                _step(
                    stack,
                    scenario=scenario,
                    server=kinds[k].name,
                    rate_sim=rates[k],
                    seed=scenario.seed + 1000 + step,
                )
                for k in names
            )
        )
        await stack.backends.wait_idle(timeout=scenario.request_timeout_s * scenario.time_scale)
        await stack.backends.reset()
        for k, ok in zip(names, outcomes, strict=True):
            tried[k].append((round(rates[k], 3), ok))
            if ok:
                held[k] = rates[k]
                rates[k] *= STEP_FACTOR
            elif held[k] == 0.0 and len(tried[k]) <= _MAX_DESCENTS:
                rates[k] /= STEP_FACTOR * STEP_FACTOR  # the first guess was too high: go down
            else:
                active.discard(k)
    per_server = {s.name: held[_kind(s)] for s in scenario.fleet if not s.late}
    if not any(per_server.values()):
        raise HarnessError(f"no server kept up at any rate tried: {tried}")
    return {
        "capacity_rps": sum(per_server.values()),
        "per_kind_rps": held,
        "per_server_rps": per_server,
        "tried": tried,
        "method": f"each kind alone, x{STEP_FACTOR} per {scenario.capacity_step_s:g} s step "
        f"(>= {_MIN_REQUESTS} requests), until under {KEEP_UP_SHARE:.0%} of the step's second "
        "half meet the SLO",
    }
