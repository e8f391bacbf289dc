"""What observing the data path costs: the latency Envoy's gRPC access log adds to a request,
and the control plane's CPU per request it observes.

    python -m xds_lab.bench.data_path_overhead [--rate 500] [--seconds 6] [--rounds 6]
        [--out docs/bench]

Two arms, each a control plane and an Envoy of its own, in front of the same fast backend: one
with ``signals.data_path`` off, one with it on (every request's entry streamed to its control
plane, which reads it into the data path's window). They differ in nothing else. The arms
alternate (A, B, B, A, ...) at a fixed open-loop rate, so drift on a shared machine falls on
both; one slow moment of a shared machine moves one round's p99, so the added p99 is also
given round by round, with their median. Each arm's control-plane CPU (user + system, from
``/proc``) is summed over its measured rounds only; the data-path arm's CPU per 1,000
requests is the difference over the entries it counted
(``xds_control_data_path_entries_total{outcome="counted"}``, read from its ``/metrics``, so
it also says every request arrived). Envoy's own request time (``downstream_rq_time``, its
histogram's quantiles) is given beside the client's: what Envoy spends, without the Python
client's event loop and the machine's scheduling. Writes ``data_path_overhead.json|.md``
under ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.bench import entry
from xds_lab.bench.arms import ArmSamples, chat_body, open_loop
from xds_lab.bench.fast_backend import FastBackend
from xds_lab.bench.fleet_report import process_cpu_s
from xds_lab.bench.tables import markdown_table
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["main"]

ARMS = ("off", "on")

_ENVOY_QUANTILES = ("p50", "p99", "p99.9", "p100")

_COUNTED = re.compile(r'^xds_control_data_path_entries_total\{outcome="counted"\} (\S+)$', re.M)


class _SharedBackend:
    """The fast backend another stack started: its addresses, nothing to start or stop."""

    def __init__(self, backend: FastBackend) -> None:
        self._backend = backend

    @property
    def addresses(self) -> Mapping[str, str]:
        return self._backend.addresses

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


@dataclass
class Arm:
    """One arm's answers, its control plane's CPU over the measured rounds, and the entries
    it counted."""

    samples: ArmSamples = field(default_factory=ArmSamples)
    cpu_s: float = 0.0
    counted: float = 0.0
    sent: int = 0
    round_p99_s: list[float] = field(default_factory=list)
    """Each measured round's p99: one slow moment of a shared machine moves one round's."""
    envoy_ms: dict[str, float] = field(default_factory=dict)
    """Envoy's own request time (``downstream_rq_time``, since it started), by quantile."""


def _config(stack: Stack[Any], *, data_path: bool) -> dict[str, Any]:
    address = next(iter(stack.backends.addresses.values()))
    return one_pool_config(
        endpoints=[{"address": address}],
        listener_port=stack.listener_port,
        signals={"data_path": {"enabled": data_path}},
    )


async def _counted(stack: Stack[Any]) -> float:
    found = _COUNTED.search(await stack.control_plane.metrics())
    return float(found.group(1)) if found else 0.0


async def _envoy_quantiles(stack: Stack[Any]) -> dict[str, float]:
    """Envoy's cumulative ``http.gateway.downstream_rq_time`` quantiles (ms): its time from the
    request's first byte to the response's last, without the client's event loop."""
    text = await stack.envoy.admin_get(
        "/stats?format=json&filter=^http%5C.gateway%5C.downstream_rq_time$"
    )
    for stat in json.loads(text)["stats"]:
        histograms = stat.get("histograms")
        if histograms is None:
            continue
        for found in histograms["computed_quantiles"]:
            if found["name"] == "http.gateway.downstream_rq_time":
                quantiles = histograms["supported_quantiles"]
                values = [v["cumulative"] for v in found["values"]]
                return {f"p{q:g}": float(v) for q, v in zip(quantiles, values, strict=True)}
    return {}


def _pid(stack: Stack[Any]) -> int:
    proc = stack.control_plane.process.proc
    assert proc is not None
    return proc.pid


async def _measure(args: argparse.Namespace, workdir: Path) -> dict[str, Arm]:
    backend = FastBackend()
    (workdir / "off").mkdir()
    (workdir / "on").mkdir()
    stacks: dict[str, Stack[Any]] = {
        "off": Stack(workdir=workdir / "off", backends=backend, log_level="warning"),
        "on": Stack(workdir=workdir / "on", backends=_SharedBackend(backend), log_level="warning"),
    }
    arms = {name: Arm() for name in ARMS}
    body = chat_body(1)
    try:
        for name, stack in stacks.items():
            await stack.start(_config(stack, data_path=name == "on"))
        urls = {name: f"{stack.url}/v1/chat/completions" for name, stack in stacks.items()}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200)) as session:
            for name in ARMS:  # warm-up: connections, the access-log stream
                await open_loop(session, urls[name], body, rate=args.rate, seconds=1.0)
            await asyncio.sleep(2.0)  # the warm-up's entries flushed and read
            for r in range(args.rounds):
                for name in ARMS if r % 2 == 0 else ARMS[::-1]:
                    stack, arm = stacks[name], arms[name]
                    counted0, cpu0 = await _counted(stack), process_cpu_s(_pid(stack))
                    got = await open_loop(
                        session, urls[name], body, rate=args.rate, seconds=args.seconds
                    )
                    await asyncio.sleep(2.0)  # Envoy's buffer flushes within 1 s
                    arm.cpu_s += process_cpu_s(_pid(stack)) - cpu0
                    arm.counted += await _counted(stack) - counted0
                    arm.sent += len(got.latencies_s) + got.failed
                    arm.round_p99_s.append(percentile(got.latencies_s, 99))
                    arm.samples.latencies_s += got.latencies_s
                    arm.samples.failed += got.failed
        for name, stack in stacks.items():
            arms[name].envoy_ms = await _envoy_quantiles(stack)
    finally:
        for stack in stacks.values():
            await stack.close()
    return arms


def _cpu_per_1000(arms: Mapping[str, Arm]) -> float:
    on, off = arms["on"], arms["off"]
    if not on.counted:
        return float("nan")
    return (on.cpu_s - off.cpu_s) / on.counted * 1000


def _median_added_p99(arms: Mapping[str, Arm]) -> float:
    """The median over rounds of the on arm's p99 minus the off arm's in the same round."""
    added = sorted(
        on - off for on, off in zip(arms["on"].round_p99_s, arms["off"].round_p99_s, strict=True)
    )
    middle = len(added) // 2
    return added[middle] if len(added) % 2 else (added[middle - 1] + added[middle]) / 2


def results_table(arms: Mapping[str, Arm]) -> str:
    """One row per arm: latency, what the access log added, control-plane CPU, entries."""
    base = arms["off"].samples.latencies_s
    rows = []
    for name in ARMS:
        arm = arms[name]
        got = arm.samples.latencies_s
        p50, p99 = percentile(got, 50), percentile(got, 99)
        added = name != "off"
        rows.append(
            [
                f"data path {name}",
                len(got),
                arm.samples.failed,
                f"{p50 * 1000:.2f}",
                f"{p99 * 1000:.2f}",
                f"{(p50 - percentile(base, 50)) * 1000:+.2f}" if added else "",
                f"{(p99 - percentile(base, 99)) * 1000:+.2f}" if added else "",
                f"{arm.cpu_s:.2f}",
                f"{arm.counted:.0f} of {arm.sent}" if added else "",
                "/".join(f"{arm.envoy_ms.get(q, float('nan')):.2f}" for q in _ENVOY_QUANTILES),
            ]
        )
    header = [
        "arm",
        "ok",
        "failed",
        "p50 ms",
        "p99 ms",
        "added p50",
        "added p99",
        "control-plane CPU s",
        "entries counted",
        "Envoy's own p50/p99/p99.9/max ms",
    ]
    table = markdown_table(header=header, rows=rows)
    return (
        f"{table}\n\nRound by round, the access log added {_median_added_p99(arms) * 1000:+.2f} "
        "ms at p99 (the median over rounds of on minus off; rounds "
        + ", ".join(
            f"{(on - off) * 1000:+.2f}"
            for on, off in zip(arms["on"].round_p99_s, arms["off"].round_p99_s, strict=True)
        )
        + f"). Control-plane CPU per 1,000 observed requests (on minus off, over the entries "
        f"counted): {_cpu_per_1000(arms):.3f} s."
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table and the machine, write JSON and Markdown."""
    parser = entry.parser(
        "data_path_overhead", __doc__, out=entry.DOCS_BENCH, rate=500.0, seconds=6.0, rounds=6
    )
    run = entry.start(parser, argv)
    args = run.args
    with tempfile.TemporaryDirectory(prefix="bench-data-path-") as tmp:
        arms = asyncio.run(_measure(args, Path(tmp)))
    summary = {
        name: {
            "ok": len(arm.samples.latencies_s),
            "failed": arm.samples.failed,
            "p50_s": percentile(arm.samples.latencies_s, 50),
            "p99_s": percentile(arm.samples.latencies_s, 99),
            "control_plane_cpu_s": arm.cpu_s,
            "entries_counted": arm.counted,
            "sent": arm.sent,
            "round_p99_s": arm.round_p99_s,
            "envoy_downstream_rq_time_ms": arm.envoy_ms,
        }
        for name, arm in arms.items()
    }
    run.finish(
        title="Data-path observation overhead: measured",
        what=f"{args.rate:g} requests/s per arm, {args.rounds} rounds of "
        f"{args.seconds:g} s per arm, arms alternating.",
        body=[results_table(arms)],
        summary={
            "arms": summary,
            "cpu_s_per_1000_requests": _cpu_per_1000(arms),
            "median_round_added_p99_s": _median_added_p99(arms),
        },
    )


if __name__ == "__main__":
    main()
