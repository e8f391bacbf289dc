"""Requests per second one ``xds-control sim`` process serves across a 16-server fleet.

The fleet runs in its own process (``xds-control sim``); the load generator runs in this one
and offers seeded open-loop Poisson load, spread evenly over the servers, on loopback. Each
step raises the offered rate; the table shows what was served, latency, and the CPU the sim
process used (2 cores on the reference machine: the fleet, the load generator and, in real
benchmarks, Envoy share them).

    .venv/bin/python -m xds_lab.bench.sim_throughput [--rates 100,200,400] [--seconds 8]
        [--stream 0.0] [--profile vllm-h100|mixed] [--input-mean 128] [--output-mean 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from xds_lab.bench import entry
from xds_lab.bench.tables import markdown_table
from xds_lab.loadgen import LoadSpec, build_requests, percentile, run_load

__all__ = ["main"]

# The mixed fleet's slow servers saturate on simulated GPU time long before the process runs
# out of CPU; ``--profile`` picks one profile for all 16 to measure the process instead.
MIXED = [
    ("vllm-h100", 6),
    ("vllm-a100", 4),
    ("sglang-h100", 2),
    ("triton-a100", 2),
    ("onnxruntime-l4", 2),
]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _start_fleet(
    workdir: Path, *, profile: str, time_scale: float
) -> tuple[asyncio.subprocess.Process, list[str]]:
    groups = MIXED if profile == "mixed" else [(profile, 16)]
    lines = [f"time_scale: {time_scale}", "groups:"]
    lines += [f"  - {{profile: {p}, count: {n}}}" for p, n in groups]
    fleet = workdir / "fleet.yaml"
    fleet.write_text("\n".join(lines) + "\n")
    exe = Path(sys.executable).parent / "xds-control"
    proc = await asyncio.create_subprocess_exec(
        str(exe),
        "--log-level",
        "warning",
        "-o",
        "json",
        "sim",
        "--fleet",
        str(fleet),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    text = b""
    while True:
        text += await asyncio.wait_for(proc.stdout.read(4096), 30)
        try:
            info = json.loads(text)
            break
        except ValueError:
            continue
    return proc, [s["url"] for s in info["servers"]]


async def _step(
    urls: list[str], *, rate: float, args: argparse.Namespace, pid: int
) -> dict[str, float]:
    spec = LoadSpec(
        rate=rate,
        requests=int(rate * args.seconds),
        seed=int(rate),
        input_mean=args.input_mean,
        output_mean=args.output_mean,
        output_cap=4 * args.output_mean,
        stream_fraction=args.stream,
        api="completions",
    )
    plan = build_requests(spec)
    shares = [plan[i :: len(urls)] for i in range(len(urls))]
    cpu0, own0, t0 = _cpu_seconds(pid), time.process_time(), time.monotonic()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        runs = await asyncio.gather(
            *(run_load(url, share, session=http) for url, share in zip(urls, shares, strict=True))
        )
    wall = time.monotonic() - t0
    cpu = _cpu_seconds(pid) - cpu0
    own = time.process_time() - own0
    results = [r for run in runs for r in run.results]
    ok = [r for r in results if r.ok]
    e2e = [r.e2e_s for r in ok]
    return {
        "offered_rps": rate,
        "served_rps": len(ok) / max(run.duration_s for run in runs),
        "ok": len(ok),
        "failed": len(results) - len(ok),
        "e2e_p50_ms": percentile(e2e, 50) * 1000,
        "e2e_p99_ms": percentile(e2e, 99) * 1000,
        "sim_cpu_pct": 100 * cpu / wall,
        "loadgen_cpu_pct": 100 * own / wall,
        "max_lag_ms": 1000 * max(run.max_lag_s for run in runs),
    }


async def _main(rates: list[float], args: argparse.Namespace) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, urls = await _start_fleet(Path(tmp), profile=args.profile, time_scale=args.time_scale)
        try:
            return [await _step(urls, rate=r, args=args, pid=proc.pid) for r in rates]
        finally:
            proc.terminate()
            await proc.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its table."""
    parser = entry.parser("sim_throughput", __doc__, seconds=8.0)
    parser.add_argument("--rates", default="100,200,400,600", help="Offered req/s, comma list.")
    parser.add_argument("--profile", default="vllm-h100", help="One profile for 16, or 'mixed'.")
    parser.add_argument("--time-scale", type=float, default=1.0, help="Simulated time factor.")
    parser.add_argument("--input-mean", type=float, default=128, help="Mean prompt tokens.")
    parser.add_argument("--output-mean", type=int, default=16, help="Mean output tokens.")
    parser.add_argument("--stream", type=float, default=0.0, help="Share of streamed requests.")
    run = entry.start(parser, argv, envoy=False)
    args = run.args
    rates = [float(r) for r in args.rates.split(",")]
    rows = asyncio.run(_main(rates, args))
    table = markdown_table(
        header=list(rows[0]),
        rows=[[f"{v:.0f}" if abs(v) >= 10 else f"{v:.2f}" for v in row.values()] for row in rows],
    )
    run.finish(
        title="Simulator throughput: measured",
        what=f"16 x {args.profile} in one process, prompt ~{args.input_mean:.0f} / output "
        f"~{args.output_mean} tokens, stream share {args.stream}, {args.seconds:g} s per step.",
        body=[table],
        summary={"steps": rows},
    )


if __name__ == "__main__":
    main()
