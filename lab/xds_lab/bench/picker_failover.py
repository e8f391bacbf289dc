"""The picker killed under the benchmark's load: does any request fail, and does traffic fall
back to weighted MAGLEV? (Issue 16, must-show 4, beside ``tests/e2e/test_picker.py``.)

    python -m xds_lab.bench.picker_failover [--scenario prefix-heavy] [--load 0.8]
        [--capacity 6.31] [--seconds 60] [--runs 1] [--envoy-debug] [--out DIR]

The scenario's fleet behind Envoy with the ``picker`` policy, 20 s of warm-up, then
``--seconds`` of arrivals at ``--load`` of ``--capacity``; halfway through the arrivals the
control plane (and with it the picker) is killed with SIGKILL. Prints, per run, for the
requests sent before and after the kill: how many, how many failed (anything but a whole 200
answer) and each failure's status, error, server and start time relative to the kill; how many
prefix groups went to more than one server (MAGLEV on ``x-prefix-hash`` with the frozen last
weights sends one group to one server); and every Envoy counter on the failure paths that moved
(``ext_proc``, 5xx, resets, retries, connect failures). ``--envoy-debug`` turns Envoy's
``ext_proc`` and ``router`` loggers to debug and keeps their lines around the kill: printed,
and under ``--out`` written apart from the figures, as ``runs/failover-N-envoy.log``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.bench import entry
from xds_lab.bench.point import load_spec
from xds_lab.bench.policies import POLICIES
from xds_lab.bench.scenario import load_scenario
from xds_lab.bench.stack import BenchStack, bench_stack, use_policy
from xds_lab.bench.tables import runs_dir
from xds_lab.loadgen import build_requests, run_load
from xds_lab.loadgen.client import Result
from xds_lab.loadgen.workloads import RequestSpec

__all__ = ["main", "run_failover"]

_SCENARIOS = Path(__file__).parent / "scenarios"
_FAILURE_PATHS = re.compile(
    r"ext_proc|rq_5xx|rq_503|_reset|rq_retry|cx_connect_fail|rq_timeout|pending_failure"
    r"|cx_destroy_remote_with_active_rq|no_healthy|override"
)
"""Envoy counters that say how a request failed or was saved (picker cluster and pool)."""


def _failure(result: Result, killed_at: float) -> dict[str, Any]:
    return {
        "status": result.status,
        "error": result.error[:160],
        "server": result.server,
        "started_vs_kill_s": round(result.started - killed_at, 3),
        "e2e_s": round(result.e2e_s, 3),
    }


def _phase(
    results: Sequence[Result], *, plan: Sequence[RequestSpec], killed_at: float
) -> dict[str, Any]:
    servers: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r.ok:
            servers[plan[r.index].headers.get("x-prefix-hash", "")].add(r.server)
    return {
        "requests": len(results),
        "failed": sum(not r.ok for r in results),
        "failures": [_failure(r, killed_at) for r in results if not r.ok],
        "groups": len(servers),
        "groups_on_several_servers": sum(len(s) > 1 for s in servers.values()),
        "by_server": _by_server(results),
    }


def _by_server(results: Sequence[Result]) -> dict[str, dict[str, float]]:
    """Requests and the slowest answer per server: where a slow answer came from."""
    out: dict[str, dict[str, float]] = {}
    for r in results:
        row = out.setdefault(r.server or "?", {"requests": 0, "e2e_max_s": 0.0})
        row["requests"] += 1
        row["e2e_max_s"] = round(max(row["e2e_max_s"], r.e2e_s), 2)
    return dict(sorted(out.items()))


def _moved(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        key: after[key] - before.get(key, 0)
        for key in sorted(after)
        if _FAILURE_PATHS.search(key) and after[key] != before.get(key, 0)
    }


async def _envoy_debug(stack: BenchStack) -> None:
    """Turn Envoy's ``ext_proc`` and ``router`` loggers to debug (its admin's /logging)."""
    url = stack.envoy.admin_url + "/logging?paths=ext_proc:debug,router:debug,http2:debug"
    async with aiohttp.ClientSession() as session, session.post(url) as response:
        response.raise_for_status()


def _log_lines(stack: BenchStack, *, keep: re.Pattern[str]) -> list[str]:
    log = stack.envoy.process.log_path
    if not log.exists():
        return []
    return [
        line[:300] for line in log.read_text(errors="replace").splitlines() if keep.search(line)
    ]


async def run_failover(
    *,
    scenario_name: str,
    load: float,
    capacity: float,
    seconds: float,
    workdir: Path,
    envoy_debug: bool = False,
) -> dict[str, Any]:
    """One run: warm-up, then arrivals with the control plane killed halfway."""
    scenario = load_scenario(_SCENARIOS / f"{scenario_name}.yaml")
    stack = bench_stack(scenario, workdir=workdir)
    timeout_s = scenario.request_timeout_s
    log_lines: list[str] = []
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
        if envoy_debug:
            await _envoy_debug(stack)
        before = await stack.envoy.stats()
        load_task = asyncio.create_task(run_load(stack.url, plan, timeout_s=timeout_s))
        await asyncio.sleep(kill_at)
        stack.control_plane.process.kill()
        killed_at = time.monotonic()
        run = await load_task
        after = await stack.envoy.stats()
        weights = await stack.envoy_weights()
        if envoy_debug:
            log_lines = _log_lines(
                stack, keep=re.compile(r"error|reset|fail|closed|timeout|503", re.IGNORECASE)
            )
    finally:
        await stack.close()
    cut = [r for r in run.results if plan[r.index].at < kill_at]
    rest = [r for r in run.results if plan[r.index].at >= kill_at]
    return {
        "scenario": scenario.name,
        "offered_rps": capacity * load,
        "seconds": seconds,
        "killed_at_s": kill_at,
        "before_kill": _phase(cut, plan=plan, killed_at=killed_at),
        "after_kill": _phase(rest, plan=plan, killed_at=killed_at),
        "envoy_failure_counters": _moved(before, after),
        "envoy_weights_at_end": weights,
        "loadgen_max_lag_s": round(run.max_lag_s, 4),
        "envoy_debug_lines": log_lines[-80:],
    }


def _summary(index: int, result: dict[str, Any]) -> str:
    """One line: failures with their cause (status, error, server, start vs the kill)."""
    failures = result["before_kill"]["failures"] + result["after_kill"]["failures"]
    causes = [
        f"{f['status']} {f['error'].strip() or 'ok'} on {f['server'] or '?'}"
        f" ({f['started_vs_kill_s']:+.1f} s vs kill, {f['e2e_s']:.1f} s)"
        for f in failures
    ]
    counters = result["envoy_failure_counters"]
    allowed = sum(v for k, v in counters.items() if k.endswith(".failure_mode_allowed"))
    requests = result["before_kill"]["requests"] + result["after_kill"]["requests"]
    after = result["after_kill"]
    return (
        f"run {index}: failed {len(failures)} of {requests} ({'; '.join(causes) or 'none'});"
        f" failed open {allowed}; groups on several servers after the kill"
        f" {after['groups_on_several_servers']}/{after['groups']}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``--runs`` times; print each result as JSON, then one line per run."""
    parser = entry.parser("picker_failover", __doc__, load=0.8, capacity=6.31, seconds=60.0, runs=1)
    parser.add_argument("--scenario", default="prefix-heavy")
    parser.add_argument("--envoy-debug", action="store_true")
    run = entry.start(parser, argv)
    args = run.args
    lines, results = [], []
    for index in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="bench-picker-failover-") as tmp:
            result = asyncio.run(
                run_failover(
                    scenario_name=args.scenario,
                    load=args.load,
                    capacity=args.capacity,
                    seconds=args.seconds,
                    workdir=Path(tmp),
                    envoy_debug=args.envoy_debug,
                )
            )
        print(json.dumps(result, indent=1), flush=True)
        debug: list[str] = result.pop("envoy_debug_lines")  # a trace, not a figure
        if args.out is not None:  # each run as it ends: a later run may not
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"failover-{index}.json").write_text(json.dumps(result, indent=1) + "\n")
            if debug:
                runs_dir(args.out).mkdir(parents=True, exist_ok=True)
                log = runs_dir(args.out) / f"failover-{index}-envoy.log"
                log.write_text("\n".join(debug) + "\n")
        lines.append(_summary(index, result))
        print(lines[-1], flush=True)
        results.append(result)
    run.finish(
        title="Picker failover: measured",
        what=f"{args.scenario} at {args.load:g} x {args.capacity:g} req/s, {args.seconds:g} s "
        "of arrivals, the control plane killed halfway.",
        body=lines,
        summary={"runs": results},
    )


if __name__ == "__main__":
    main()
