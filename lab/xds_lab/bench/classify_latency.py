"""The latency the classify filter adds: one Envoy, two listeners in front of the same fast
backend, one plain and one with ``classify`` (and a request class to match), at a fixed open-loop
rate.

    python -m xds_lab.bench.classify_latency [--rate 500] [--seconds 2] [--rounds 6]
        [--body-kib 1,8] [--out docs/bench]

The arms alternate (plain, classified, classified, plain, ...) so drift on a shared machine
falls on both. Latency is the client's, request sent to response read, over loopback; the
difference between the arms is the filter's (buffering the body, the Lua parse, the second
route match). Writes ``classify_latency.json|.md`` under ``--out``, its CDF plot under ``runs/``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from xds_control.config import Listener
from xds_control.xds.lua import classifier_source
from xds_lab.bench import entry
from xds_lab.bench.arms import ArmSamples, alternate_arms, chat_body
from xds_lab.bench.fast_backend import FastBackend
from xds_lab.bench.tables import markdown_table, write_cdf
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["main"]

ARMS = ("plain", "classified")


def _config(stack: Stack[FastBackend], classified_port: int) -> dict[str, Any]:
    address = next(iter(stack.backends.addresses.values()))
    return {
        "pools": [{"name": "echo", "endpoints": [{"address": address}]}],
        "listeners": [
            {
                "name": "plain",
                "address": f"127.0.0.1:{stack.listener_port}",
                "routes": [{"name": "all", "pool": "echo"}],
            },
            {
                "name": "classified",
                "address": f"127.0.0.1:{classified_port}",
                "classify": {},
                "routes": [
                    {"name": "long", "match": {"prompt_tokens": {"min": 4000}}, "pool": "echo"},
                    {"name": "chat", "match": {"stream": True}, "pool": "echo"},
                    {"name": "all", "pool": "echo"},
                ],
            },
        ],
    }


async def _measure(args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    stack = Stack(workdir=workdir, backends=FastBackend(), log_level="warning")
    classified_port = free_port()
    urls = {
        "plain": f"{stack.url}/v1/chat/completions",
        "classified": f"http://127.0.0.1:{classified_port}/v1/chat/completions",
    }
    cells: list[dict[str, Any]] = []
    try:
        await stack.start(_config(stack, classified_port))
        connector = aiohttp.TCPConnector(limit=200)
        async with aiohttp.ClientSession(connector=connector) as session:
            for kib in args.body_kib:
                body = chat_body(kib)
                samples = await alternate_arms(
                    session,
                    urls,
                    body,
                    rate=args.rate,
                    seconds=args.seconds,
                    rounds=args.rounds,
                )
                for arm in ARMS:
                    cells.append(_cell(arm, kib, len(body), samples[arm]))
                print(f"  {kib} KiB body: done", flush=True)
    finally:
        await stack.close()
    return cells


def parse_cost(kibs: Sequence[int]) -> list[list[object]]:
    """The filter's script alone (``classify``: decode and classify one body) under PUC Lua 5.1
    through ``lupa``, best of 5 x 200 calls per body size; ``[]`` without ``lupa``. Envoy runs
    LuaJIT, faster than PUC Lua, so this is an upper bound of the script's CPU per request,
    free of the client's and the machine's noise that the end-to-end figures carry."""
    try:
        from lupa import lua51  # type: ignore[import-untyped]  # a test dependency
    except ImportError:
        return []
    listener = Listener.model_validate(
        {
            "name": "g",
            "address": "127.0.0.1:1",
            "classify": {},
            "routes": [{"name": "a", "pool": "a"}],
        }
    )
    assert listener.classify is not None
    source = classifier_source(listener.classify, listener=listener, model_header="x-model")
    runtime = lua51.LuaRuntime(encoding=None)
    runtime.execute(source + "\nCLASSIFY_SETTINGS = CLASSIFY")
    classify, settings = runtime.globals().classify, runtime.globals().CLASSIFY_SETTINGS
    rows: list[list[object]] = []
    for kib in kibs:
        body, best = chat_body(kib), math.inf
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(200):
                classify(body, settings)
            best = min(best, (time.perf_counter() - started) / 200)
        rows.append([f"{kib} KiB", len(body), f"{best * 1000:.3f}"])
    return rows


def _cell(arm: str, kib: int, size: int, samples: ArmSamples) -> dict[str, Any]:
    got = samples.latencies_s
    return {
        "route": arm,
        "body_kib": kib,
        "body_bytes": size,
        "ok": len(got),
        "failed": samples.failed,
        "p50_s": percentile(got, 50),
        "p99_s": percentile(got, 99),
        "samples_s": got,
    }


def results_table(cells: Sequence[dict[str, Any]]) -> str:
    """One row per body size and route, and what the filter added at p50 and p99."""
    plain = {c["body_kib"]: c for c in cells if c["route"] == "plain"}
    rows = []
    for c in cells:
        base = plain[c["body_kib"]]
        added = c["route"] != "plain"
        rows.append(
            [
                f"{c['body_kib']} KiB",
                c["route"],
                c["ok"],
                c["failed"],
                f"{c['p50_s'] * 1000:.2f}",
                f"{c['p99_s'] * 1000:.2f}",
                f"{(c['p50_s'] - base['p50_s']) * 1000:+.2f}" if added else "",
                f"{(c['p99_s'] - base['p99_s']) * 1000:+.2f}" if added else "",
            ]
        )
    header = ["body", "route", "ok", "failed", "p50 ms", "p99 ms", "added p50", "added p99"]
    return markdown_table(header=header, rows=rows)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table and the machine, write JSON, Markdown and a CDF plot."""
    parser = entry.parser(
        "classify_latency", __doc__, out=entry.DOCS_BENCH, rate=500.0, seconds=2.0, rounds=6
    )
    parser.add_argument("--body-kib", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    run = entry.start(parser, argv)
    args = run.args
    with tempfile.TemporaryDirectory(prefix="bench-classify-") as tmp:
        cells = asyncio.run(_measure(args, Path(tmp)))
    body = [results_table(cells)]
    if parsed := parse_cost([*args.body_kib, 64]):
        header = ["body", "bytes", "script alone, ms (PUC Lua 5.1, best of 5 x 200)"]
        body += ["", markdown_table(header=header, rows=parsed)]

    def plot(path: Path) -> None:
        write_cdf(
            {f"{c['body_kib']} KiB, {c['route']}": c["samples_s"] for c in cells},
            path=path,
            xlabel="request -> response through Envoy (ms)",
            title=f"classify filter at {args.rate:g} requests/s",
        )

    run.finish(
        title="Classifier latency: measured",
        what=f"{args.rate:g} requests/s per arm, {args.rounds} rounds of "
        f"{args.seconds:g} s per arm, arms alternating.",
        body=body,
        summary={"cells": [{k: v for k, v in c.items() if k != "samples_s"} for c in cells]},
        plot=plot,
    )


if __name__ == "__main__":
    main()
