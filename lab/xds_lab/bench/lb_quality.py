"""Load-balancing quality: every scenario in ``xds_lab/bench/scenarios/``, every policy, through a
real Envoy; plus the context-length surface and push latency, joined into one report.

    python -m xds_lab.bench.lb_quality [--quick] [--scenarios mixed,homogeneous] [--out docs/bench]
        [--seeds 3] [--min-requests 600] [--policies picker,maglev_weights,ideal]
        [--loads 0.8] [--capacity 6.3]

By default (``make bench``) the headline point of each scenario (80%) runs 3 seeds of at least
600 measured requests per policy and a 100% point checks the capacity (``rigor.FULL``);
``--quick`` runs one seed at half the scenario's durations (``rigor.QUICK``). ``--policies``,
``--loads`` (only these levels: no 100% confirmation point) and ``--capacity`` (req/s, skips the
ramp) narrow a run to the points a question needs, for every scenario named.

Writes ``<scenario>.json|.md``, ``context_surface.json`` and ``summary.md|.json`` (aims, every
table, the machine) under ``--out``, and the plots and each scenario's raw samples under
``--out``'s ``runs/`` (git ignores it). One scenario alone:
``xds-control bench run --scenario FILE``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xds_control.log import configure_logging
from xds_lab.bench import entry, run_scenario_file
from xds_lab.bench.aims import aim_lines
from xds_lab.bench.picker_stats import picker_lines
from xds_lab.bench.push_cell import measure_push_latency
from xds_lab.bench.push_latency import results_table
from xds_lab.bench.rigor import FULL, QUICK
from xds_lab.bench.surface import run_surface, write_heatmaps
from xds_lab.bench.tables import markdown_table, runs_dir

__all__ = ["SCENARIOS", "main"]

SCENARIOS_DIR = Path(__file__).parent / "scenarios"
SCENARIOS = ("mixed", "mixed-native", "prefix-heavy", "homogeneous", "degraded", "cold-start")
"""Run order; the aims read mixed, prefix-heavy and homogeneous."""


def _surface(out: Path, *, quick: bool) -> str:
    cells = asyncio.run(
        run_surface(
            concurrency=(1, 4, 16, 32) if quick else (1, 2, 4, 8, 16, 32),
            seconds=2.0 if quick else 4.0,
        )
    )
    (out / "context_surface.json").write_text(json.dumps(cells, indent=1))
    write_heatmaps(
        cells, path=runs_dir(out) / "context_surface.png", title="vllm-h100 alone, 128 output"
    )
    rows = [
        [
            c["prompt_tokens"],
            c["concurrency"],
            c["ok"],
            f"{c['ttft_p50_s'] * 1000:.0f}",
            f"{c['ttft_p99_s'] * 1000:.0f}",
            f"{c['output_tokens_per_s']:.0f}",
        ]
        for c in cells
    ]
    header = ["prompt", "clients", "requests", "TTFT p50 ms", "TTFT p99 ms", "out tok/s"]
    return markdown_table(header=header, rows=rows)


def _push(*, quick: bool) -> str:
    async def cells() -> list[Any]:
        out = []
        with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
            for envoys in (1, 10):
                out.append(
                    await measure_push_latency(
                        envoys=envoys,
                        endpoints=100,
                        changes=30 if quick else 100,
                        workdir=Path(tmp) / str(envoys),
                    )
                )
        return out

    return results_table(asyncio.run(cells()))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the scenarios, the surface and push latency; write every file and ``summary.md``."""
    parser = entry.parser("lb_quality", __doc__, out=entry.DOCS_BENCH)
    parser.add_argument("--quick", action="store_true", help="half durations, fewer points")
    parser.add_argument("--seeds", type=int, help="seeds at the headline point (3; --quick: 1)")
    parser.add_argument(
        "--min-requests", type=int, help="requests per seed at the headline point (600; quick: 0)"
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="names or paths")
    parser.add_argument("--policies", help="comma-separated; default: each scenario's own")
    parser.add_argument("--loads", help="comma-separated fractions of capacity; no 100%% check")
    parser.add_argument("--capacity", type=float, help="req/s: skip the capacity ramp")
    parser.add_argument("--no-surface", action="store_true")
    parser.add_argument("--no-push", action="store_true")
    run = entry.start(parser, argv, log_level="info")  # progress: capacity steps and points
    args = run.args
    rigor = QUICK if args.quick else FULL
    if args.seeds is not None:
        rigor = dataclasses.replace(rigor, seeds=args.seeds)
    if args.min_requests is not None:
        rigor = dataclasses.replace(rigor, min_requests=args.min_requests)
    overrides: dict[str, Any] = {}
    if args.policies:
        overrides["policies"] = tuple(p for p in args.policies.split(",") if p)
    if args.loads:
        overrides["loads"] = tuple(float(x) for x in args.loads.split(",") if x)
        rigor = dataclasses.replace(rigor, confirm_load=None)
    if args.capacity is not None:
        overrides["capacity_rps"] = args.capacity
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, Any] = {}
    sections: list[str] = []
    for item in (s for s in args.scenarios.split(",") if s):
        path = Path(item) if item.endswith(".yaml") else SCENARIOS_DIR / f"{item}.yaml"
        print(f"  scenario {path.name} ...", flush=True)
        result = run_scenario_file(
            path, out_dir=args.out, quick=args.quick, rigor=rigor, overrides=overrides
        )
        results[result["scenario"]["name"]] = result
        sections.append((args.out / f"{result['scenario']['name']}.md").read_text())
        sections += picker_lines(result)
    if not args.no_surface:
        print("  context-length surface ...", flush=True)
        sections.append("## Context-length surface\n\n" + _surface(args.out, quick=args.quick))
    if not args.no_push:
        print("  push latency ...", flush=True)
        configure_logging(level="warning")  # a log line per snapshot would be timed too
        sections.append(
            "## Push latency (weight change -> ACK, 100 endpoints)\n\n" + _push(quick=args.quick)
        )
    run.finish(
        title="LB quality: measured",
        what=f"wall time {time.monotonic() - started:.0f} s{' (--quick)' if args.quick else ''}.",
        body=["## Aims", "", *aim_lines(results), "", *sections],
        summary={"aims": aim_lines(results)},
        file="summary",
    )


if __name__ == "__main__":
    main()
