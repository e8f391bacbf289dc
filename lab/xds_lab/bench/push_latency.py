"""Weight change -> ACK from every Envoy: how long a new weight takes to reach the fleet.

The xDS server runs in this process (grpc.aio), the Envoys are real processes. Each sample is
one weight change: from just before ``cache.set_snapshot`` to the moment the last Envoy's ACK
of the new EDS version reaches the server (heard through ``StreamRegistry``'s ACK listener, so
nothing polls). Building and serialising the snapshot (``reconcile_once``) is timed apart.

    python -m xds_lab.bench.push_latency --envoys 1,10 --endpoints 100,1000 --changes 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from xds_control.log import configure_logging
from xds_lab.bench.push_cell import CellResult, measure_push_latency
from xds_lab.bench.tables import machine_info, markdown_table, write_cdf
from xds_lab.harness.envoy import find_envoy
from xds_lab.loadgen import percentile

__all__ = ["main", "results_table"]


def _cell_name(result: CellResult) -> str:
    plural = "s" if result.envoys > 1 else ""
    return f"{result.envoys} Envoy{plural} x {result.endpoints} endpoints"


def _ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def results_table(results: Sequence[CellResult]) -> str:
    """The Markdown table: ACK latency and build time percentiles per cell, in ms."""
    rows = [
        [
            r.envoys,
            r.endpoints,
            len(r.ack_s),
            _ms(percentile(r.ack_s, 50)),
            _ms(percentile(r.ack_s, 99)),
            _ms(max(r.ack_s)),
            _ms(percentile(r.first_ack_s, 50)),
            _ms(percentile(r.build_s, 50)),
            _ms(percentile(r.build_s, 99)),
            "yes" if r.applied else "NO",
        ]
        for r in results
    ]
    header = ["Envoys", "Endpoints", "Changes", "ACK p50 ms", "ACK p99 ms", "ACK max ms"]
    header += ["first ACK p50 ms", "build p50 ms", "build p99 ms", "Envoy applied"]
    return markdown_table(header=header, rows=rows)


def _json_report(results: Sequence[CellResult], machine: Mapping[str, str]) -> dict[str, Any]:
    cells = []
    for r in results:
        cell = asdict(r)
        cell["applied"] = r.applied
        for key, samples in (("ack", r.ack_s), ("first_ack", r.first_ack_s), ("build", r.build_s)):
            cell[f"{key}_ms"] = {
                "p50": percentile(samples, 50) * 1000,
                "p99": percentile(samples, 99) * 1000,
                "max": max(samples) * 1000,
            }
        cells.append(cell)
    return {"benchmark": "push_latency", "machine": dict(machine), "cells": cells}


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m xds_lab.bench.push_latency", description=__doc__
    )
    parser.add_argument("--changes", type=int, default=200, help="weight changes per cell")
    parser.add_argument("--envoys", type=_ints, default=[1, 10], help="e.g. 1,10")
    parser.add_argument("--endpoints", type=_ints, default=[100, 1000], help="e.g. 100,1000")
    parser.add_argument(
        "--lb",
        choices=["maglev", "least_request"],
        default="maglev",
        help="the pool's policy (Envoy rebuilds a MAGLEV table on every change)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    parser.add_argument("--plot", type=Path, default=None, help="write a latency CDF PNG here")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace) -> list[CellResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
        for envoys in args.envoys:
            for endpoints in args.endpoints:
                workdir = Path(tmp) / f"{envoys}x{endpoints}"
                result = await measure_push_latency(
                    envoys=envoys,
                    endpoints=endpoints,
                    changes=args.changes,
                    workdir=workdir,
                    lb=args.lb,
                )
                results.append(result)
                print(f"  {_cell_name(result)}: done", flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    """Run every cell, print the table and the machine; write JSON and a plot if asked."""
    args = _parse_args(argv)
    configure_logging(level="warning")  # a log line per snapshot would be timed too
    machine = machine_info(envoy_bin=find_envoy())
    results = asyncio.run(_run(args))
    print()
    print(results_table(results))
    print()
    print("\n".join(f"- {key}: {value}" for key, value in machine.items()))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_json_report(results, machine), indent=2))
    if args.plot is not None:
        series = {_cell_name(r): r.ack_s for r in results}
        write_cdf(
            series,
            path=args.plot,
            xlabel="weight change -> last Envoy's ACK (ms)",
            title="xds-control push latency",
        )
    if not all(r.applied for r in results):
        raise SystemExit("an Envoy ACKed but does not run the final weights: see the table")


if __name__ == "__main__":
    main()
