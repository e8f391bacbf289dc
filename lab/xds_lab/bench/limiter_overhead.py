"""The latency the priority-class limiter adds: one Envoy, two listeners in front of the same
fast backend, one plain and one with ``limits`` (per-class routes, a local rate limit bucket per
route, big enough never to refuse), at a fixed open-loop rate.

    python -m xds_lab.bench.limiter_overhead [--rate 500] [--seconds 6] [--rounds 2]
        [--out docs/bench]

The arms alternate so drift on a shared machine falls on both; the difference between them is
the filter's token-bucket check and the header match that picks the class's route. Writes
``limiter_overhead.json|.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.bench import entry
from xds_lab.bench.arms import ArmSamples, alternate_arms, chat_body
from xds_lab.bench.fast_backend import FastBackend
from xds_lab.bench.tables import markdown_table
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["main"]

ARMS = ("plain", "limited")


def _config(stack: Stack[FastBackend], limited_port: int, rate: float) -> dict[str, Any]:
    address = next(iter(stack.backends.addresses.values()))
    budget = {"rate_per_s": rate * 10}  # never refuses: only the check's cost is measured
    return {
        "pools": [{"name": "echo", "endpoints": [{"address": address}]}],
        "listeners": [
            {
                "name": "plain",
                "address": f"127.0.0.1:{stack.listener_port}",
                "routes": [{"name": "all", "pool": "echo"}],
            },
            {
                "name": "limited",
                "address": f"127.0.0.1:{limited_port}",
                "limits": {
                    "classes": {c: budget for c in ("critical", "high", "medium")},
                    "adapt": {"enabled": False},
                },
                "routes": [{"name": "all", "pool": "echo"}],
            },
        ],
    }


async def _measure(args: argparse.Namespace, workdir: Path) -> dict[str, ArmSamples]:
    stack = Stack(workdir=workdir, backends=FastBackend(), log_level="warning")
    limited_port = free_port()
    urls = {
        "plain": f"{stack.url}/v1/chat/completions",
        "limited": f"http://127.0.0.1:{limited_port}/v1/chat/completions",
    }
    try:
        await stack.start(_config(stack, limited_port, args.rate))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200)) as session:
            return await alternate_arms(
                session,
                urls,
                chat_body(1),
                rate=args.rate,
                seconds=args.seconds,
                rounds=args.rounds,
            )
    finally:
        await stack.close()


def results_table(samples: dict[str, ArmSamples]) -> str:
    """One row per arm, and what the limiter added at p50 and p99."""
    base = samples["plain"].latencies_s
    rows = []
    for arm in ARMS:
        got = samples[arm].latencies_s
        p50, p99 = percentile(got, 50), percentile(got, 99)
        added = arm != "plain"
        rows.append(
            [
                arm,
                len(got),
                samples[arm].failed,
                f"{p50 * 1000:.2f}",
                f"{p99 * 1000:.2f}",
                f"{(p50 - percentile(base, 50)) * 1000:+.2f}" if added else "",
                f"{(p99 - percentile(base, 99)) * 1000:+.2f}" if added else "",
            ]
        )
    header = ["listener", "ok", "failed", "p50 ms", "p99 ms", "added p50", "added p99"]
    return markdown_table(header=header, rows=rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table and the machine, write JSON and Markdown."""
    parser = entry.parser(
        "limiter_overhead", __doc__, out=entry.DOCS_BENCH, rate=500.0, seconds=6.0, rounds=2
    )
    run = entry.start(parser, argv)
    args = run.args
    with tempfile.TemporaryDirectory(prefix="bench-limiter-") as tmp:
        samples = asyncio.run(_measure(args, Path(tmp)))
    summary = {
        arm: {
            "ok": len(s.latencies_s),
            "failed": s.failed,
            "p50_s": percentile(s.latencies_s, 50),
            "p99_s": percentile(s.latencies_s, 99),
        }
        for arm, s in samples.items()
    }
    run.finish(
        title="Limiter overhead: measured",
        what=f"{args.rate:g} requests/s per arm, {args.rounds} rounds of "
        f"{args.seconds:g} s per arm, arms alternating.",
        body=[results_table(samples)],
        summary={"arms": summary},
    )


if __name__ == "__main__":
    main()
