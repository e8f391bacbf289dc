"""The latency the per-request picker adds: the same one-pool stack (one Envoy, echo backends)
without the picker, with it, and with it and flow control on (nothing ever waits: the cost
of the hold-free path), sequential chat requests sharing 20 system prompts.

    python -m xds_lab.bench.picker_latency [--requests 400] [--rounds 2] [--rate 0]

The arms alternate (plain, picker, picker+flow, plain, ...) so drift on a shared machine falls
on all. Latency is the client's, request sent to response read, over loopback; the difference
is the picker's: three ext_proc messages (request headers, buffered body, response headers) to
the picker in the control plane's process, the parse and the rank. Prints p50/p90/p99 per arm.
With ``--rate R`` the requests arrive open-loop at R a second instead of one after another
(the picker and Envoy then serve many at once, as under real load).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from xds_lab.bench import entry
from xds_lab.bench.tables import markdown_table
from xds_lab.harness.backends import EchoBackends
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["chat_body", "main", "timed"]

_WARMUP = 50


def chat_body(i: int) -> bytes:
    """Request ``i``'s chat body: one of 20 system prompts (800 characters) and a short question."""
    messages = [
        {"role": "system", "content": f"system prompt {i % 20} " + "x" * 800},
        {"role": "user", "content": "hello " * 20},
    ]
    return json.dumps({"model": "m", "messages": messages}).encode()


ARMS = ("plain", "picker", "picker+flow")
"""No picker; the picker; the picker with flow control on and nothing waiting (the pool never
saturates at one request at a time): what the hold-free path adds."""


async def timed(session: aiohttp.ClientSession, url: str, i: int) -> float:
    """Milliseconds from sending request ``i`` to ``url`` to reading its whole answer."""
    started = time.perf_counter()
    async with session.post(url, data=chat_body(i)) as response:
        await response.read()
        response.raise_for_status()
    return (time.perf_counter() - started) * 1000


async def _open_loop(
    session: aiohttp.ClientSession, url: str, *, n: int, rate: float
) -> list[float]:
    """``n`` requests arriving every ``1/rate`` s whatever the answers do; their milliseconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    for i in range(n):
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        tasks.append(asyncio.create_task(timed(session, url, i)))
    return list(await asyncio.gather(*tasks))


async def _arm(*, arm: str, requests: int, rate: float) -> list[float]:
    """Milliseconds per request, after a warm-up, through a fresh stack."""
    backends = EchoBackends(ports=[free_port() for _ in range(4)])
    stack = Stack(workdir=Path(tempfile.mkdtemp(prefix="picker-latency-")), backends=backends)
    try:
        picker: dict[str, object] = {"address": f"127.0.0.1:{free_port()}"}
        if arm == "picker+flow":
            picker["flow"] = {}
        pool = {} if arm == "plain" else {"picker": picker}
        endpoints = [{"address": backends.address(i), "weight": 10} for i in range(4)]
        await stack.start(
            one_pool_config(endpoints=endpoints, listener_port=stack.listener_port, pool=pool)
        )
        url = f"{stack.url}/v1/chat/completions"
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            for i in range(_WARMUP):
                await timed(session, url, i)
            if rate > 0:
                return await _open_loop(session, url, n=requests, rate=rate)
            return [await timed(session, url, _WARMUP + i) for i in range(requests)]
    finally:
        await stack.close()


async def _run(*, requests: int, rounds: int, rate: float) -> list[list[int | str]]:
    """A row per arm: its name, requests, p50, p90 and p99 ms."""
    arms: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(rounds):
        for arm in ARMS:
            arms[arm] += await _arm(arm=arm, requests=requests, rate=rate)
    return [
        [arm, len(values), *(f"{percentile(values, q):.2f}" for q in (50, 90, 99))]
        for arm, values in arms.items()
    ]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments and print the table."""
    parser = entry.parser("picker_latency", __doc__, rounds=2, rate=0.0)
    parser.add_argument("--requests", type=int, default=400, help="requests per arm and round")
    run = entry.start(parser, argv)
    rows = asyncio.run(_run(requests=run.args.requests, rounds=run.args.rounds, rate=run.args.rate))
    pace = "one after another" if run.args.rate <= 0 else f"open-loop at {run.args.rate:g}/s"
    header = ["arm", "requests", "p50 ms", "p90 ms", "p99 ms"]
    run.finish(
        title="Picker latency: measured",
        what=f"{run.args.requests} requests per arm, {run.args.rounds} rounds, {pace}, "
        "arms alternating.",
        body=[markdown_table(header=header, rows=rows)],
        summary={"arms": rows},
    )


if __name__ == "__main__":
    main()
