"""The picker killed under the benchmark's load: does any request fail, and does traffic fall
back to weighted MAGLEV? (Issue 16, must-show 4, beside ``tests/e2e/test_picker.py``.)

    python -m xds_lab.bench.picker_failover [--scenario prefix-heavy] [--load 0.8]
        [--capacity 6.31] [--seconds 60]

The scenario's fleet behind Envoy with the ``picker`` policy, 20 s of warm-up, then
``--seconds`` of arrivals at ``--load`` of ``--capacity``; halfway through the arrivals the
control plane (and with it the picker) is killed with SIGKILL. Prints, for the requests sent
before and after the kill: how many, how many failed (anything but a whole 200 answer), and how
many prefix groups went to more than one server (MAGLEV on ``x-prefix-hash`` with the frozen
last weights sends one group to one server); and Envoy's ``ext_proc`` counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xds_lab.bench.point import load_spec
from xds_lab.bench.policies import POLICIES
from xds_lab.bench.scenario import load_scenario
from xds_lab.bench.stack import bench_stack, use_policy
from xds_lab.loadgen import build_requests, run_load
from xds_lab.loadgen.client import Result
from xds_lab.loadgen.workloads import RequestSpec

__all__ = ["main", "run_failover"]

_SCENARIOS = Path(__file__).parent / "scenarios"


def _phase(results: Sequence[Result], plan: Sequence[RequestSpec]) -> dict[str, Any]:
    servers: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r.ok:
            servers[plan[r.index].headers.get("x-prefix-hash", "")].add(r.server)
    return {
        "requests": len(results),
        "failed": sum(not r.ok for r in results),
        "failures": dict(
            Counter(f"{r.status} {r.error[:80]}".strip() for r in results if not r.ok)
        ),
        "failed_by_server": dict(Counter(r.server or "?" for r in results if not r.ok)),
        "groups": len(servers),
        "groups_on_several_servers": sum(len(s) > 1 for s in servers.values()),
    }


async def run_failover(
    *, scenario_name: str, load: float, capacity: float, seconds: float, workdir: Path
) -> dict[str, Any]:
    """One run: warm-up, then arrivals with the control plane killed halfway."""
    scenario = load_scenario(_SCENARIOS / f"{scenario_name}.yaml")
    stack = bench_stack(scenario, workdir=workdir)
    timeout_s = scenario.request_timeout_s
    try:
        await stack.backends.start()
        await use_policy(stack, scenario=scenario, policy=POLICIES["picker"])
        warm = load_spec(scenario, rate_rps=capacity * 0.5, seconds=20, seed=scenario.seed + 500)
        await run_load(stack.url, build_requests(warm), timeout_s=timeout_s)
        await stack.backends.reset()
        plan = build_requests(
            load_spec(scenario, rate_rps=capacity * load, seconds=seconds, seed=scenario.seed)
        )
        kill_at = seconds / 2
        before = await stack.envoy.stats()
        load_task = asyncio.create_task(run_load(stack.url, plan, timeout_s=timeout_s))
        await asyncio.sleep(kill_at)
        stack.control_plane.process.kill()
        run = await load_task
        after = await stack.envoy.stats()
    finally:
        await stack.close()
    cut = [r for r in run.results if plan[r.index].at < kill_at]
    rest = [r for r in run.results if plan[r.index].at >= kill_at]
    ext = {
        key: after.get(f"http.gateway.ext_proc.picker.{key}", 0)
        - before.get(f"http.gateway.ext_proc.picker.{key}", 0)
        for key in ("streams_started", "failure_mode_allowed", "message_timeouts")
    }
    return {
        "scenario": scenario.name,
        "offered_rps": capacity * load,
        "seconds": seconds,
        "killed_at_s": kill_at,
        "before_kill": _phase(cut, plan),
        "after_kill": _phase(rest, plan),
        "envoy_ext_proc": ext,
        "loadgen_max_lag_s": round(run.max_lag_s, 4),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run once and print the result as JSON."""
    parser = argparse.ArgumentParser(prog="python -m xds_lab.bench.picker_failover")
    parser.add_argument("--scenario", default="prefix-heavy")
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--capacity", type=float, default=6.31, help="req/s of the fleet")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-picker-failover-") as tmp:
        result = asyncio.run(
            run_failover(
                scenario_name=args.scenario,
                load=args.load,
                capacity=args.capacity,
                seconds=args.seconds,
                workdir=Path(tmp),
            )
        )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
