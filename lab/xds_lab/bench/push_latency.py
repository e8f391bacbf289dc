"""Weight change -> ACK from every Envoy: how long a new weight takes to reach the fleet.

The xDS server runs in this process (grpc.aio), the Envoys are real processes. Each sample is
one weight change: from just before ``cache.set_snapshot`` to the moment the last Envoy's ACK
of the new EDS version reaches the server (heard through ``StreamRegistry``'s ACK listener, so
nothing polls). Building and serialising the snapshot (``reconcile_once``) is timed apart.

    python -m xds_lab.bench.push_latency --envoys 1,10 --endpoints 100,1000 --changes 100 \
        [--out docs/bench]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from xds_lab.bench import entry
from xds_lab.bench.push_cell import CellResult, measure_push_latency
from xds_lab.bench.tables import markdown_table, write_cdf
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


def _cells(results: Sequence[CellResult]) -> list[dict[str, Any]]:
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
    return cells


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = entry.parser("push_latency", __doc__)
    parser.add_argument("--changes", type=int, default=200, help="weight changes per cell")
    parser.add_argument("--envoys", type=_ints, default=[1, 10], help="e.g. 1,10")
    parser.add_argument("--endpoints", type=_ints, default=[100, 1000], help="e.g. 100,1000")
    parser.add_argument(
        "--lb",
        choices=["maglev", "least_request"],
        default="maglev",
        help="the pool's policy (Envoy rebuilds a MAGLEV table on every change)",
    )
    return parser


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
    """Run every cell, print the table and the machine; under ``--out``, write them, the
    samples as JSON and a latency CDF."""
    run = entry.start(_parser(), argv)
    results = asyncio.run(_run(run.args))

    def plot(path: Path) -> None:
        write_cdf(
            {_cell_name(r): r.ack_s for r in results},
            path=path,
            xlabel="weight change -> last Envoy's ACK (ms)",
            title="xds-control push latency",
        )

    run.finish(
        title="Push latency: measured",
        what=f"{run.args.changes} weight changes per cell, {run.args.lb}.",
        body=[results_table(results)],
        summary={"cells": _cells(results)},
        plot=plot,
    )
    if not all(r.applied for r in results):
        raise SystemExit("an Envoy ACKed but does not run the final weights: see the table")


if __name__ == "__main__":
    main()
