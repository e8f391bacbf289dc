"""The mixed fleet as it would be deployed (one pool per engine, each read in its own metric
dialect, one route over the pools) against today's benchmark form (one pool in which every
server exports vLLM's metric names), at one load level, through a real Envoy.

    python -m xds_lab.bench.mixed_pools [--load 0.8] [--seconds 15] [--policy maglev_weights]
        [--forms one_pool,pool_per_engine] [--seeds 1] [--out docs/bench]

The scenario is ``scenarios/mixed.yaml`` (its fleet, workload, SLO and seed), with its measured
capacity (``--capacity``, req/s) instead of a new capacity ramp, so a run takes under two
minutes per form. Inside each pool the endpoints are balanced by ``--policy`` with engine weights.

How the route splits between the pools: the engine does not weigh a route that mixes vLLM with
Triton or ONNX Runtime pools (their step times are different measures, docs/routing.md), so the
split is the pools' static ``weight``s. ``pool_per_engine`` sets them as an operator who
measured each kind would: in proportion to each kind's capacity (``PER_SERVER_RPS``, from the
mixed scenario's capacity ramp), times its servers. ``pool_per_engine_equal`` leaves them
equal: what a route over pools does with no weights given.

With the data path on (``signals.data_path``), the engine weighs such a route too: every
server without a decode step of its own is timed by Envoy on the vLLM servers' scale
(docs/weights.md). ``pool_per_engine_data_path`` is the per-engine form with no static weights
and the data path on; ``one_pool_native`` is its one-pool counterpart (the ``mixed-native``
scenario: one pool, each server in its own dialect, the data path on). ``--seeds N`` runs each
form N times (the scenario's seed, +1, ...), a row per run. Writes ``mixed_pools.json|.md``
(the table's figures, the route weights over time among them) and every point whole, with its
raw series, as ``runs/mixed_pools.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xds_lab.bench import entry
from xds_lab.bench.point import load_spec, run_point
from xds_lab.bench.policies import POLICIES, Policy, control_plane_config
from xds_lab.bench.runner import table_figures
from xds_lab.bench.scenario import Scenario, load_scenario
from xds_lab.bench.stack import BenchStack, bench_stack
from xds_lab.bench.tables import markdown_table, runs_dir
from xds_lab.loadgen import build_requests, run_load
from xds_lab.sim.profiles import get_profile, read_as

__all__ = ["main"]

SCENARIO = Path(__file__).parent / "scenarios" / "mixed.yaml"
CAPACITY_RPS = 17.33
"""The mixed fleet's capacity as ``lb_quality`` measured it (docs/bench/mixed.json)."""
PER_SERVER_RPS = {"vllm": 6.24, "triton": 2.42, "onnxruntime": 0.1}
"""Requests/s one server of each kind kept within the SLO alone (same source; the L4s kept
up with none of the steps tried, the lowest 0.1)."""
FORMS = (
    "one_pool",
    "pool_per_engine",
    "pool_per_engine_equal",
    "pool_per_engine_data_path",
    "one_pool_native",
)
_DATA_PATH = frozenset({"pool_per_engine_data_path", "one_pool_native"})


def _fleet(scenario: Scenario, form: str) -> Scenario:
    """The scenario's fleet; for the per-engine forms, each server in its own dialect."""
    if form == "one_pool":
        return scenario
    fleet = [
        s.model_copy(update={"overrides": {k: v for k, v in s.overrides.items() if k != "metrics"}})
        for s in scenario.fleet
    ]
    return scenario.model_copy(update={"fleet": tuple(fleet)})


def _config(stack: BenchStack, scenario: Scenario, *, form: str, policy: Policy) -> dict[str, Any]:
    profiles = {s.name: get_profile(s.profile, **s.overrides) for s in scenario.fleet}
    addresses = stack.backends.addresses
    slots = {addresses[n]: p.max_num_seqs for n, p in profiles.items()}
    one = control_plane_config(
        policy=policy,
        batch_slots=slots,
        listener_port=stack.listener_port,
        engines={addresses[n]: read_as(p) for n, p in profiles.items()},
        # Set either way: left unset, a route over a vLLM and a Triton pool turns it on.
        signals={"data_path": {"enabled": form in _DATA_PATH}},
    )
    if form in {"one_pool", "one_pool_native"}:
        return one
    lb = one["pools"][0]["lb"]
    engines: dict[str, list[str]] = {}
    for name, profile in profiles.items():
        engines.setdefault(profile.engine, []).append(name)
    pools = [
        {
            "name": engine,
            "engine": engine,
            "lb": lb,
            "endpoints": [
                {"address": addresses[n], "batch_slots": profiles[n].max_num_seqs} for n in names
            ],
        }
        for engine, names in engines.items()
    ]
    weights = {e: max(1, round(10 * PER_SERVER_RPS[e] * len(n))) for e, n in engines.items()}
    route_pools = [
        {"name": e, "weight": weights[e]} if form == "pool_per_engine" else {"name": e}
        for e in engines
    ]
    listener = {**one["listeners"][0], "routes": [{"name": "all", "pools": route_pools}]}
    return {**one, "pools": pools, "listeners": [listener]}


async def _run_form(
    scenario: Scenario,
    *,
    form: str,
    policy: Policy,
    rate: float,
    seconds: float,
    seed: int,
    workdir: Path,
) -> dict[str, Any]:
    scenario = _fleet(scenario, form)
    stack = bench_stack(scenario, workdir=workdir)
    try:
        await stack.start(_config(stack, scenario, form=form, policy=policy))
        # Unmeasured load first, so the engine has signals (as the scenario runner does).
        warm = load_spec(scenario, rate_rps=rate * 0.6, seconds=scenario.warmup_s, seed=500)
        await run_load(stack.url, build_requests(warm), timeout_s=scenario.request_timeout_s)
        await stack.backends.wait_idle(timeout=scenario.request_timeout_s)
        routes: list[dict[str, Any]] = []
        sampler = asyncio.create_task(_sample_routes(stack, routes), name="bench-routes")
        try:
            point = await run_point(
                stack,
                scenario=scenario,
                policy=policy,
                rate_rps=rate,
                seed=seed,
                seconds=seconds,
            )
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
    finally:
        await stack.close()
    point["route_weights"] = routes
    point["form"] = form
    point["seed"] = seed
    kind = {s.name: s.profile for s in scenario.fleet}
    served: Counter[str] = Counter()
    for server, count in point["servers"].items():
        served[kind.get(server, server)] += count
    point["served_by_kind"] = dict(served)
    return point


_ROUTE_SAMPLE_S = 1.0


async def _sample_routes(stack: BenchStack, out: list[dict[str, Any]]) -> None:
    """The engine's pool weights of every route, every second, as the admin API shows them
    (what it pushes; Envoy applies them with the next RDS): ``{"t", "routes"}``."""
    start = time.monotonic()
    while True:
        with contextlib.suppress(Exception):  # a missed sample is a gap, not a failed point
            view = await stack.control_plane.get_json("/v1/weights")
            out.append({"t": round(time.monotonic() - start, 2), "routes": view.get("routes", {})})
        await asyncio.sleep(_ROUTE_SAMPLE_S)


def _route_range(point: dict[str, Any]) -> str:
    """Each pool's lowest and highest weight over the point's samples, on any route."""
    seen: dict[str, list[int]] = {}
    for sample in point.get("route_weights", []):
        for weights in sample["routes"].values():
            for pool, weight in weights.items():
                seen.setdefault(pool, []).append(int(weight))
    return " / ".join(f"{p} {min(w)}-{max(w)}" for p, w in sorted(seen.items())) or "-"


def results_table(points: Sequence[dict[str, Any]]) -> str:
    """One row per form: TTFT, goodput, errors and who served what."""
    rows = [
        [
            p["form"],
            str(p.get("seed", "")),
            f"{p['offered_rps']:.2f}",
            f"{p['ttft_p50_s'] * 1000:.0f}",
            f"{p['ttft_p90_s'] * 1000:.0f}",
            f"{p['ttft_p99_s'] * 1000:.0f}",
            f"{p['goodput_rps']:.2f}",
            p.get("errors", ""),
            " / ".join(f"{k} {v}" for k, v in sorted(p["served_by_kind"].items())),
            _route_range(p),
        ]
        for p in points
    ]
    header = [
        "form",
        "seed",
        "offered req/s",
        "TTFT p50 ms",
        "p90 ms",
        "p99 ms",
        "goodput",
        "errors",
    ]
    return markdown_table(header=[*header, "served by kind", "route weights (min-max)"], rows=rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Run each form once at ``--load`` x capacity; print and write the table."""
    parser = entry.parser(
        "mixed_pools", __doc__, out=entry.DOCS_BENCH, load=0.8, capacity=CAPACITY_RPS, seconds=15.0
    )
    parser.add_argument("--policy", default="maglev_weights", choices=sorted(POLICIES))
    parser.add_argument("--forms", default="one_pool,pool_per_engine")
    parser.add_argument("--seeds", type=int, default=1, help="runs of each form")
    run = entry.start(parser, argv)
    args = run.args
    scenario = load_scenario(SCENARIO)
    policy = POLICIES[args.policy]
    points = []
    forms = args.forms.split(",")
    for form in forms:
        if form not in FORMS:
            raise SystemExit(f"unknown form {form!r}; known: {', '.join(FORMS)}")
    for k in range(args.seeds):
        for form in forms:  # forms alternate, so the machine's drift touches each alike
            with tempfile.TemporaryDirectory(prefix=f"bench-{form}-") as tmp:
                point = asyncio.run(
                    _run_form(
                        scenario,
                        form=form,
                        policy=policy,
                        rate=args.capacity * args.load,
                        seconds=args.seconds,
                        seed=scenario.seed + k,
                        workdir=Path(tmp),
                    )
                )
            print(f"  {form} seed {scenario.seed + k}: done", flush=True)
            points.append(point)
    run.finish(
        title="Mixed fleet: one pool per engine against one pool",
        what=f"{args.load:.0%} of {args.capacity:g} req/s for {args.seconds:g} s per form, "
        f"{args.policy} in each pool.",
        body=[results_table(points)],
        summary=table_figures({"points": points}),
    )
    if args.out is not None:
        runs_dir(args.out).mkdir(parents=True, exist_ok=True)
        whole = json.dumps({"points": points}, indent=1, default=str)
        (runs_dir(args.out) / "mixed_pools.json").write_text(whole)


if __name__ == "__main__":
    main()
