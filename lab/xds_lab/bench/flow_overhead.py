"""What flow control costs a request when nothing waits, and what reading a response's usage
costs on top: paired arms in one stack, so the machine's noise falls on all of them alike.

    python -m xds_lab.bench.flow_overhead [--rate 500] [--seconds 4] [--rounds 40] [--out DIR]

One Envoy, one control plane with its picker, four pools of two echo backends each, a route per
pool: ``picker`` (the picker alone: today's path), ``flow`` (the picker with flow control on;
the pools never saturate, so it is the hold-free path), ``flow+usage`` (flow control and a
token budget no request reaches: the response's body comes through the picker for its usage,
one loopback round trip per piece) and ``plain`` (no picker, for reference). Requests arrive
open-loop at ``--rate`` a second in all, each sent to an arm drawn at random, so every arm
sees the same moments of the same machine: a round's p99 of one arm against another's in the
same round is a paired difference. Each round is ``--seconds`` long; the report gives each
arm's p50/p99 over all rounds, the median over rounds of the per-round p99 difference against
``picker``, and a 95% interval for the pooled p99 difference by resampling rounds (bootstrap).

Separate runs of one arm each (``picker_latency``) swung by +-2 ms at p99 from run to run on
this 2-core machine; pairing takes that swing out of the difference.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from xds_lab.bench import entry
from xds_lab.bench.picker_latency import timed
from xds_lab.bench.tables import markdown_table
from xds_lab.harness.backends import EchoBackends
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["ARMS", "main"]

ARMS = ("plain", "picker", "flow", "flow+usage")
_BASELINE = "picker"
_BACKENDS_PER_ARM = 2
_WARMUP = 200
_RESAMPLES = 2000
_CHECK = "xds_control_flow_check_seconds"

Phases = dict[str, list[tuple[float, float]]]
"""A histogram per phase: (bucket bound in seconds, cumulative count), bounds ascending."""
Rounds = list[dict[str, list[float]]]


def _pool(arm: str, *, index: int, backends: EchoBackends, picker: str) -> dict[str, Any]:
    """Arm ``arm``'s pool over its own backends."""
    first = index * _BACKENDS_PER_ARM
    endpoints = [
        {"address": backends.address(first + i), "weight": 10} for i in range(_BACKENDS_PER_ARM)
    ]
    pool: dict[str, Any] = {"name": _name(arm), "endpoints": endpoints}
    if arm != "plain":
        pool["picker"] = {"address": picker}
    if arm.startswith("flow"):
        pool["picker"]["flow"] = {}
    if arm == "flow+usage":
        pool["picker"]["flow"]["budgets"] = [{"output_tokens": 10**12}]
    return pool


def _name(arm: str) -> str:
    return arm.replace("+", "-")


def config(*, backends: EchoBackends, listener_port: int, picker: str) -> dict[str, Any]:
    """The four arms' pools, a route per arm (``/<arm>/...``), one listener."""
    pools = [_pool(arm, index=i, backends=backends, picker=picker) for i, arm in enumerate(ARMS)]
    routes = [
        {"name": _name(arm), "pool": _name(arm), "match": {"prefix": f"/{_name(arm)}/"}}
        for arm in ARMS
    ]
    listener = {"name": "gateway", "address": f"127.0.0.1:{listener_port}", "routes": routes}
    return {"pools": pools, "listeners": [listener]}


async def _round(
    session: aiohttp.ClientSession, base: str, *, rate: float, seconds: float, rng: random.Random
) -> dict[str, list[float]]:
    """One round of open-loop arrivals, each to a random arm; each arm's milliseconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    n = int(rate * seconds)
    sent: list[tuple[str, asyncio.Task[float]]] = []
    for i in range(n):
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        arm = rng.choice(ARMS)
        url = f"{base}/{_name(arm)}/v1/chat/completions"
        sent.append((arm, asyncio.create_task(timed(session, url, i))))
    out: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for arm, task in sent:
        out[arm].append(await task)
    return out


async def measure(*, rate: float, seconds: float, rounds: int, seed: int) -> tuple[Rounds, Phases]:
    """Every round's milliseconds per arm, after a warm-up, through one fresh stack, and the
    control plane's flow-check histogram at the end."""
    backends = EchoBackends(ports=[free_port() for _ in range(len(ARMS) * _BACKENDS_PER_ARM)])
    stack = Stack(workdir=Path(tempfile.mkdtemp(prefix="flow-overhead-")), backends=backends)
    rng = random.Random(seed)
    try:
        picker = f"127.0.0.1:{free_port()}"
        await stack.start(
            config(backends=backends, listener_port=stack.listener_port, picker=picker)
        )
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for i in range(_WARMUP):
                arm = ARMS[i % len(ARMS)]
                await timed(session, f"{stack.url}/{_name(arm)}/v1/chat/completions", i)
            measured = [
                await _round(session, stack.url, rate=rate, seconds=seconds, rng=rng)
                for _ in range(rounds)
            ]
        return measured, check_buckets(await stack.control_plane.metrics())
    finally:
        await stack.close()


def check_buckets(metrics: str) -> Phases:
    """``xds_control_flow_check_seconds`` from the control plane's /metrics text."""
    phases: dict[str, list[tuple[float, float]]] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == _CHECK + "_bucket":
                bucket = (float(sample.labels["le"]), sample.value)
                phases.setdefault(sample.labels["phase"], []).append(bucket)
    return {phase: sorted(buckets) for phase, buckets in phases.items()}


def bucket_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The least bucket bound at or under which ``q`` of the observations lie (an upper
    bound of the quantile). Not ``picker_stats.histogram_quantile``'s interpolation: these
    buckets are a factor 2-4 apart, so a bound is what the histogram can honestly say."""
    total = buckets[-1][1]
    return next(bound for bound, count in buckets if count >= q * total)


def phase_rows(phases: Phases) -> list[list[Any]]:
    """A row per phase: requests, and the bucket bounds under which half and 99% fall."""
    return [
        [
            phase,
            int(buckets[-1][1]),
            f"<= {1e3 * bucket_quantile(buckets, 0.5):g}",
            f"<= {1e3 * bucket_quantile(buckets, 0.99):g}",
        ]
        for phase, buckets in sorted(phases.items())
        if buckets and buckets[-1][1] > 0
    ]


def _p99(values: list[float]) -> float:
    return percentile(values, 99)


def summarise(rounds: Rounds, *, seed: int) -> list[list[Any]]:
    """A row per arm: requests, p50, p99 over all rounds; against ``picker``: the median over
    rounds of the per-round p99 difference and a 95% bootstrap interval (rounds resampled) of
    the pooled p99 difference."""
    rng = random.Random(seed)
    rows = []
    for arm in ARMS:
        pooled = [v for r in rounds for v in r[arm]]
        row: list[Any] = [arm, len(pooled), f"{percentile(pooled, 50):.2f}", f"{_p99(pooled):.2f}"]
        if arm == _BASELINE:
            rows.append([*row, "", ""])
            continue
        per_round = [_p99(r[arm]) - _p99(r[_BASELINE]) for r in rounds]
        draws = []
        for _ in range(_RESAMPLES):
            picked = [rng.choice(rounds) for _ in rounds]
            ours = [v for r in picked for v in r[arm]]
            theirs = [v for r in picked for v in r[_BASELINE]]
            draws.append(_p99(ours) - _p99(theirs))
        draws.sort()
        low, high = draws[int(0.025 * _RESAMPLES)], draws[int(0.975 * _RESAMPLES) - 1]
        rows.append([*row, f"{statistics.median(per_round):+.2f}", f"{low:+.2f} .. {high:+.2f}"])
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, measure, print the table."""
    parser = entry.parser(
        "flow_overhead", __doc__, out=entry.DOCS_BENCH / "flow", rounds=40, rate=500.0
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="length of a round")
    parser.add_argument("--seed", type=int, default=1)
    run = entry.start(parser, argv)
    args = run.args
    rounds, phases = asyncio.run(
        measure(rate=args.rate, seconds=args.seconds, rounds=args.rounds, seed=args.seed)
    )
    header = [
        "arm",
        "requests",
        "p50 ms",
        "p99 ms",
        "p99 - picker's, median of rounds",
        "p99 - picker's, 95% interval",
    ]
    rows = summarise(rounds, seed=args.seed)
    run.finish(
        title="Flow control when nothing waits: measured",
        what=f"open-loop at {args.rate:g}/s in all, each request to a random arm, "
        f"{args.rounds} rounds of {args.seconds:g} s.",
        body=[
            markdown_table(header=header, rows=rows),
            "",
            "Flow control's own time per request in the picker's process "
            "(`xds_control_flow_check_seconds`, all arms with a picker; release and end run "
            "for every picker pool once any pool has flow control):",
            "",
            markdown_table(
                header=["phase", "requests", "p50 ms", "p99 ms"], rows=phase_rows(phases)
            ),
        ],
        summary={"arms": rows, "flow_check_seconds": phases},
    )


if __name__ == "__main__":
    main()
