"""The latency the per-request picker adds: the same one-pool stack (one Envoy, echo backends)
with and without ``picker``, sequential chat requests sharing 20 system prompts.

    python -m xds_lab.bench.picker_latency [--requests 400] [--rounds 2]

The arms alternate (plain, picker, plain, picker, ...) so drift on a shared machine falls on
both. Latency is the client's, request sent to response read, over loopback; the difference is
the picker's: two ext_proc messages (headers, buffered body) to the picker in the control
plane's process, the parse and the rank. Prints p50/p90/p99 per arm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import aiohttp

from xds_lab.harness.backends import EchoBackends
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.loadgen import percentile

__all__ = ["main"]

_WARMUP = 50


def _body(i: int) -> bytes:
    messages = [
        {"role": "system", "content": f"system prompt {i % 20} " + "x" * 800},
        {"role": "user", "content": "hello " * 20},
    ]
    return json.dumps({"model": "m", "messages": messages}).encode()


async def _arm(*, picker: bool, requests: int) -> list[float]:
    """Milliseconds per request, after a warm-up, through a fresh stack."""
    backends = EchoBackends(ports=[free_port() for _ in range(4)])
    stack = Stack(workdir=Path(tempfile.mkdtemp(prefix="picker-latency-")), backends=backends)
    try:
        pool = {"picker": {"address": f"127.0.0.1:{free_port()}"}} if picker else {}
        endpoints = [{"address": backends.address(i), "weight": 10} for i in range(4)]
        await stack.start(
            one_pool_config(endpoints=endpoints, listener_port=stack.listener_port, pool=pool)
        )
        url = f"{stack.url}/v1/chat/completions"
        out = []
        async with aiohttp.ClientSession() as session:
            for i in range(requests + _WARMUP):
                started = time.perf_counter()
                async with session.post(url, data=_body(i)) as response:
                    await response.read()
                    response.raise_for_status()
                if i >= _WARMUP:
                    out.append((time.perf_counter() - started) * 1000)
        return out
    finally:
        await stack.close()


async def _run(*, requests: int, rounds: int) -> None:
    arms: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for picker in (False, True):
            arms[picker] += await _arm(picker=picker, requests=requests)
    print("| arm | requests | p50 ms | p90 ms | p99 ms |\n|---|---|---|---|---|")
    for picker, values in arms.items():
        cells = [f"{percentile(values, q):.2f}" for q in (50, 90, 99)]
        print(f"| {'picker' if picker else 'plain'} | {len(values)} | {' | '.join(cells)} |")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    asyncio.run(_run(requests=args.requests, rounds=args.rounds))


if __name__ == "__main__":
    main()
