"""``xds-control bench``: load generation against any OpenAI-compatible endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from xds_control.cli.app import App, OutputFormat
from xds_lab.loadgen import LoadSpec, Slo, build_requests, fingerprint, run_load, summarize
from xds_lab.loadgen.client import Result

__all__ = ["bench_app", "summary_table"]

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks: offer load, measure latency.")


def summary_table(summary: dict[str, Any]) -> Table:
    """p50/p90/p99 of TTFT, TPOT and end-to-end latency, in milliseconds."""
    table = Table(
        title=f"{summary['ok']}/{summary['requests']} ok in {summary['duration_s']:.1f}s, "
        f"{summary['throughput_rps']:.1f} req/s, goodput {summary['goodput_rps']:.1f} req/s"
    )
    for column in ("metric", "count", "mean", "p50", "p90", "p99", "max"):
        table.add_column(column, justify="right")
    for key, label in (("ttft_s", "TTFT ms"), ("tpot_s", "TPOT ms"), ("e2e_s", "E2E ms")):
        d = summary[key]
        if not d.get("count"):
            table.add_row(label, "0", "", "", "", "", "")
            continue
        cells = [f"{d[k] * 1000:.1f}" for k in ("mean", "p50", "p90", "p99", "max")]
        table.add_row(label, str(d["count"]), *cells)
    return table


@bench_app.command("load")
def load(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(help="Base URL: Envoy's listener or one server.")],
    workload: Annotated[str, typer.Option(help="chat, shared-prefix or multi-turn.")] = "chat",
    rate: Annotated[float, typer.Option(help="Mean requests per second (Poisson).")] = 10.0,
    requests: Annotated[int, typer.Option(help="Requests to send.")] = 100,
    seed: Annotated[int, typer.Option(help="Same seed, same request sequence.")] = 0,
    stream_fraction: Annotated[float, typer.Option(help="Share of streamed requests.")] = 1.0,
    api: Annotated[str, typer.Option(help="chat or completions.")] = "chat",
    input_mean: Annotated[float, typer.Option(help="Mean prompt tokens.")] = 730,
    output_mean: Annotated[float, typer.Option(help="Mean output tokens.")] = 300,
    groups: Annotated[int, typer.Option(help="shared-prefix: system prompts.")] = 8,
    system_tokens: Annotated[int, typer.Option(help="shared-prefix: their length.")] = 1024,
    turns: Annotated[int, typer.Option(help="multi-turn: turns per session.")] = 4,
    prefix_header: Annotated[str, typer.Option(help="Header carrying the prefix hash.")] = (
        "x-prefix-hash"
    ),
    session_header: Annotated[str, typer.Option(help="Header carrying the session id.")] = (
        "x-session-id"
    ),
    server_header: Annotated[str, typer.Option(help="Response header naming the server.")] = (
        "x-sim-server"
    ),
    slo_ttft: Annotated[float, typer.Option(help="Goodput SLO: TTFT seconds.")] = 2.0,
    slo_tpot: Annotated[float, typer.Option(help="Goodput SLO: seconds per output token.")] = 0.1,
    json_out: Annotated[Path | None, typer.Option(help="Write summary and results here.")] = None,
) -> None:
    """Offer seeded open-loop load to --url and print latency percentiles and goodput."""
    app: App = ctx.obj if isinstance(ctx.obj, App) else App()
    try:
        spec = LoadSpec.model_validate(
            {
                "workload": workload,
                "rate": rate,
                "requests": requests,
                "seed": seed,
                "stream_fraction": stream_fraction,
                "api": api,
                "input_mean": input_mean,
                "output_mean": output_mean,
                "groups": groups,
                "system_tokens": system_tokens,
                "turns": turns,
                "prefix_header": prefix_header,
                "session_header": session_header,
            }
        )
    except ValueError as exc:
        app.abort(f"invalid load: {exc}", 2)
    plan = build_requests(spec)
    run = asyncio.run(run_load(url.rstrip("/"), plan, server_header=server_header))
    summary = summarize(run.results, duration_s=run.duration_s, slo=Slo(slo_ttft, slo_tpot))
    summary["fingerprint"] = fingerprint(plan)
    summary["max_lag_s"] = run.max_lag_s
    summary["load"] = spec.model_dump()
    if json_out is not None:
        rows = [_row(r) for r in run.results]
        json_out.write_text(json.dumps({"summary": summary, "results": rows}, indent=1))
    if app.output is OutputFormat.TABLE:
        app.console.print(summary_table(summary))
        app.console.print(f"status {summary['status']}  servers {summary['servers']}")
        app.console.print(
            f"prefix hit ratio {summary['prefix_hit_ratio']:.2f}  "
            f"sequence {summary['fingerprint'][:12]}"
        )
    else:
        app.print_data(summary)


def _row(result: Result) -> dict[str, Any]:
    keys = (
        "index",
        "scheduled",
        "status",
        "server",
        "ttft_s",
        "e2e_s",
        "output_tokens",
        "cached_tokens",
        "prompt_tokens",
        "stream",
        "error",
    )
    row = {k: getattr(result, k) for k in keys}
    row["tpot_s"] = result.tpot_s
    return row


@bench_app.command("run")
def run(
    ctx: typer.Context,
    scenario: Annotated[Path, typer.Option(help="Scenario YAML (bench/scenarios/*.yaml or any).")],
    out: Annotated[
        Path,
        typer.Option(
            help="Folder for <name>.json and <name>.md; plots and raw samples go to its runs/."
        ),
    ] = Path("docs/bench"),
    quick: Annotated[
        bool,
        typer.Option(
            help="One seed, half durations, only the 50% and 80% points (not 3 seeds "
            "of >= 600 requests at 80% and a 100% check)."
        ),
    ] = False,
    plots: Annotated[bool, typer.Option(help="Write PNG plots (needs matplotlib).")] = True,
) -> None:
    """Run every policy of a scenario through a real Envoy; write JSON, Markdown and plots."""
    from xds_control.errors import XdsControlError
    from xds_lab.bench import run_scenario_file
    from xds_lab.bench.aggregate import aggregate_points
    from xds_lab.bench.report import points_table
    from xds_lab.harness.errors import HarnessError

    app: App = ctx.obj if isinstance(ctx.obj, App) else App()
    try:
        result = run_scenario_file(scenario, out_dir=out, quick=quick, plots=plots)
    except (XdsControlError, HarnessError) as exc:
        app.abort(str(exc), 2)
    if app.output is OutputFormat.TABLE:
        app.console.print(f"capacity {result['capacity']['capacity_rps']:.2f} req/s")
        app.console.print(points_table(aggregate_points(result["points"])), markup=False)
        app.console.print(f"written to {out}/{result['scenario']['name']}.*")
    else:
        app.print_data(
            {k: v for k, v in result.items() if k != "points"}
            | {
                "points": [
                    {k: v for k, v in p.items() if k not in ("ttft_s", "weights")}
                    for p in result["points"]
                ]
            }
        )
