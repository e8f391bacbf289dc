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
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from xds_control.log import configure_logging
from xds_lab.bench.arms import ArmSamples, alternate_arms, chat_body
from xds_lab.bench.fast_backend import FastBackend
from xds_lab.bench.tables import machine_info, markdown_table, write_report
from xds_lab.harness.envoy import find_envoy
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
    parser = argparse.ArgumentParser(
        prog="python -m xds_lab.bench.limiter_overhead", description=__doc__
    )
    parser.add_argument("--rate", type=float, default=500.0, help="requests/s per arm")
    parser.add_argument("--seconds", type=float, default=6.0, help="per arm and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/bench"))
    args = parser.parse_args(argv)
    configure_logging(level="warning")
    machine = machine_info(envoy_bin=find_envoy())
    with tempfile.TemporaryDirectory(prefix="bench-limiter-") as tmp:
        samples = asyncio.run(_measure(args, Path(tmp)))
    given = sys.argv[1:] if argv is None else list(argv)
    command = " ".join(["python -m xds_lab.bench.limiter_overhead", *given])
    lines = [
        "# Limiter overhead: measured",
        "",
        f"`{command}`: {args.rate:g} requests/s per arm, {args.rounds} rounds of "
        f"{args.seconds:g} s per arm, arms alternating.",
        "",
        results_table(samples),
        "",
        *(f"- {key}: {value}" for key, value in machine.items()),
    ]
    summary = {
        arm: {
            "ok": len(s.latencies_s),
            "failed": s.failed,
            "p50_s": percentile(s.latencies_s, 50),
            "p99_s": percentile(s.latencies_s, 99),
        }
        for arm, s in samples.items()
    }
    report = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine}
    write_report(
        out=args.out, name="limiter_overhead", lines=lines, summary={**report, "arms": summary}
    )


if __name__ == "__main__":
    main()
