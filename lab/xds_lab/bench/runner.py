"""Run a scenario: measure capacity, then every policy at every load level, through Envoy."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from xds_lab.bench import picker_stats
from xds_lab.bench.capacity import measure_capacity
from xds_lab.bench.point import load_spec, run_point
from xds_lab.bench.policies import POLICIES, Policy
from xds_lab.bench.rigor import FULL, QUICK, Rigor, headline_load
from xds_lab.bench.scenario import Scenario, load_scenario
from xds_lab.bench.stack import BenchStack, bench_stack, use_policy
from xds_lab.bench.tables import runs_dir
from xds_lab.loadgen import build_requests, run_load

__all__ = ["quick_variant", "run_scenario", "run_scenario_file", "table_figures"]

_log = structlog.get_logger(__name__)

_SERIES = ("ttft_s", "weights")
"""A point's raw series: every request's TTFT and Envoy's weights over the run, read by the
plots only; the table is built from the point's other figures."""


def table_figures(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` without its points' raw series: the JSON the scenario's table is built from."""
    points = [{k: v for k, v in p.items() if k not in _SERIES} for p in result["points"]]
    return {**result, "points": points}


def quick_variant(scenario: Scenario) -> Scenario:
    """Half the durations and, without events, only the 50% and 80% points."""
    update: dict[str, Any] = {
        "duration_s": scenario.duration_s / 2,
        "warmup_s": scenario.warmup_s / 2,
        "capacity_step_s": scenario.capacity_step_s / 2,
    }
    if not scenario.events and len(scenario.loads) > 2:
        update["loads"] = (0.5, 0.8)
    return scenario.model_copy(update=update)


async def _warm_up(stack: BenchStack, scenario: Scenario, capacity: float) -> None:
    """Unmeasured load so the engine has signals (decode step, queue) before the first point."""
    ts = scenario.time_scale
    spec = load_spec(
        scenario,
        rate_rps=capacity * scenario.warmup_load / ts,
        seconds=scenario.warmup_s * ts,
        seed=scenario.seed + 500,
    )
    await run_load(stack.url, build_requests(spec), timeout_s=scenario.request_timeout_s * ts)


async def _picker_snapshot(stack: BenchStack) -> picker_stats.PickerSnapshot:
    return picker_stats.snapshot(
        metrics_text=await stack.control_plane.metrics(), envoy_stats=await stack.envoy.stats()
    )


RETRY_STATS = ("upstream_rq_retry", "upstream_rq_per_try_idle_timeout")
"""Envoy's counters of what the routes' retry policies did, summed over the clusters."""


async def _retry_counts(stack: BenchStack) -> dict[str, int]:
    stats = await stack.envoy.stats()
    return {
        key: sum(v for n, v in stats.items() if n.startswith("cluster.") and n.endswith(f".{key}"))
        for key in RETRY_STATS
    }


async def _policy_points(
    stack: BenchStack, *, scenario: Scenario, policy: Policy, cap: float, rigor: Rigor
) -> list[dict[str, Any]]:
    """Every load level (and, at the headline level, every seed) of one policy."""
    ts = scenario.time_scale
    loads = rigor.loads(scenario.loads, events=bool(scenario.events))
    headline = headline_load(loads, target=rigor.headline)
    points = []
    for i, load in enumerate(loads):
        seeds = rigor.seeds if load == headline else 1
        for k in range(seeds):
            rate = cap * load / ts
            picker = policy.via == "picker"
            before = await _picker_snapshot(stack) if picker else None
            retried = await _retry_counts(stack) if policy.through_envoy else None
            # Same seed per (load level, k): every policy sees the same arrivals.
            result = await run_point(
                stack,
                scenario=scenario,
                policy=policy,
                rate_rps=rate,
                seed=scenario.seed + i + 100 * k,
                seconds=rigor.seconds(
                    duration_s=scenario.duration_s, rate_sim=cap * load, headline=load == headline
                ),
            )
            if before is not None:
                result["picker"] = picker_stats.delta(before, await _picker_snapshot(stack))
            if retried is not None:
                after = await _retry_counts(stack)
                result["envoy_retries"] = {k: after[k] - retried[k] for k in RETRY_STATS}
            result.update(
                {
                    "policy": policy.name,
                    "load": load,
                    "ours": policy.ours,
                    "reference": policy.reference,
                    "seed_index": k,
                    "headline": load == headline,
                }
            )
            points.append(result)
            _log.info(
                "point",
                scenario=scenario.name,
                policy=policy.name,
                load=load,
                seed=k,
                requests=result["requests"],
                ttft_p99_s=round(result["ttft_p99_s"], 3),
                goodput=round(result["goodput_rps"], 2),
                hit=round(result["prefix_hit_ratio"], 3),
                lag_flag=result["lag_flag"],
                retries=result.get("envoy_retries"),
            )
            await stack.backends.wait_idle(timeout=scenario.request_timeout_s * ts)
    return points


async def run_scenario(
    scenario: Scenario, *, workdir: Path, source: str = "", rigor: Rigor = FULL
) -> dict[str, Any]:
    """Every (policy, load, seed) point of ``scenario``; the JSON-ready result."""
    started = time.time()
    stack = bench_stack(scenario, workdir=workdir)
    points: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    ts = scenario.time_scale
    try:
        # The control plane and an Envoy start with the first Envoy policy.
        await stack.backends.start()
        if scenario.capacity_rps is not None:
            capacity: dict[str, Any] = {"capacity_rps": scenario.capacity_rps, "method": "given"}
        else:
            capacity = await measure_capacity(stack, scenario=scenario)
        cap = float(capacity["capacity_rps"])
        _log.info("capacity", scenario=scenario.name, rps=round(cap, 2))
        for name in scenario.policies:
            policy = POLICIES[name]
            if policy.through_envoy:
                await use_policy(stack, scenario=scenario, policy=policy)
            else:
                await stack.stop_envoys()  # the ideal reference routes without Envoy
            if policy.engine_weights and scenario.warmup_s > 0:
                # A fault left by the previous policy's last point must not teach the engine.
                await stack.backends.reset()
                await _warm_up(stack, scenario, cap)
                await stack.backends.wait_idle(timeout=scenario.request_timeout_s * ts)
            points += await _policy_points(
                stack, scenario=scenario, policy=policy, cap=cap, rigor=rigor
            )
    finally:
        await stack.close()
    return {
        "scenario": scenario.model_dump(mode="json"),
        "source": source,
        "rigor": {"name": rigor.name, "seeds": rigor.seeds, "min_requests": rigor.min_requests},
        "capacity": capacity,
        "started_at": started,
        "wall_s": round(time.time() - started, 1),
        "points": points,
        "skipped": skipped,
    }


def run_scenario_file(
    path: Path,
    *,
    out_dir: Path,
    quick: bool = False,
    rigor: Rigor | None = None,
    plots: bool = True,
    workdir: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the scenario in ``path``; write ``<name>.json`` (the table's figures) and
    ``<name>.md`` to ``out_dir``, the whole result and the plots under ``runs_dir(out_dir)``;
    return the result. ``rigor`` defaults to ``QUICK`` with ``quick`` (which also
    halves the durations), else ``FULL``. ``overrides`` replace scenario fields (policies,
    loads, capacity_rps: a partial run from the command line), validated as the file is."""
    rigor = rigor or (QUICK if quick else FULL)
    from xds_lab.bench.report import write_report

    scenario = load_scenario(path)
    if quick:
        scenario = quick_variant(scenario)
    if overrides:
        scenario = Scenario.model_validate({**scenario.model_dump(), **overrides})
    with tempfile.TemporaryDirectory(prefix=f"bench-{scenario.name}-") as tmp:
        result = asyncio.run(
            run_scenario(scenario, workdir=workdir or Path(tmp), source=str(path), rigor=rigor)
        )
    runs_dir(out_dir).mkdir(parents=True, exist_ok=True)
    (runs_dir(out_dir) / f"{scenario.name}.json").write_text(json.dumps(result, indent=1))
    (out_dir / f"{scenario.name}.json").write_text(json.dumps(table_figures(result), indent=1))
    write_report(result, out_dir=out_dir, plots=plots)
    return result
