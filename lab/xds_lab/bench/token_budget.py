"""A tenant's output-token budget over several windows: is it served about its budget each
window? (Issue 25, must-show 4, beside ``tests/e2e/test_token_budgets.py``.)

    python -m xds_lab.bench.token_budget [--budget 8000] [--window 60] [--windows 3]
        [--clients 8] [--out DIR]

Two simulated vLLM servers (H100 profile, real speed) behind Envoy with the picker; tenant
``a`` has a budget of ``--budget`` output tokens a ``--window``; ``--clients`` clients of
tenant ``a`` stream chat answers (``stream_options.include_usage``, no ``max_tokens``: each is
admitted on the pool's estimate, 256, and settled to the usage its stream reports) back to
back for ``--windows`` whole windows, and back off 1 s after a 429. Prints, per window (by the
time each request was admitted), the output tokens served against the budget, the answers,
the 429s and their ``retry-after``; and the whole run's served tokens against ``windows x
budget``.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from xds_lab.bench import entry
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.harness.stack import Stack
from xds_lab.sim.fleet import ServerSpec

__all__ = ["main"]

TENANT_HEADER = "x-gateway-inference-fairness-id"


async def _stream(session: aiohttp.ClientSession, url: str, *, n: int) -> tuple[int, int, str]:
    """Status, the output tokens the stream's usage reported, and ``retry-after``."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"tell me about {n}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with session.post(url, json=body, headers={TENANT_HEADER: "a"}) as response:
        text = await response.text()
        tokens = 0
        for line in text.splitlines():
            if line.startswith("data:") and '"usage"' in line:
                usage = json.loads(line[5:])["usage"]
                tokens = int(usage["completion_tokens"]) if usage else tokens
        return response.status, tokens, response.headers.get("retry-after", "")


async def _run(*, budget: int, window_s: float, windows: int, clients: int) -> list[str]:
    servers = [ServerSpec(name=f"s{i}", profile="vllm-h100") for i in range(2)]
    with tempfile.TemporaryDirectory(prefix="xds-bench-budget-") as workdir:
        stack = Stack(workdir=Path(workdir), backends=local_fleet(servers))
        picker = f"127.0.0.1:{free_port()}"
        rule = {"tenant": "a", "output_tokens": budget, "window_s": window_s}
        config = one_pool_config(
            endpoints=[{"address": a} for a in stack.backends.addresses.values()],
            listener_port=stack.listener_port,
            pool={"picker": {"address": picker, "flow": {"budgets": [rule]}}},
        )
        try:
            await stack.start(config)
            return await _load(
                url=f"{stack.url}/v1/chat/completions",
                budget=budget,
                window_s=window_s,
                windows=windows,
                clients=clients,
            )
        finally:
            await stack.close()


async def _load(*, url: str, budget: int, window_s: float, windows: int, clients: int) -> list[str]:
    served: dict[int, int] = defaultdict(int)
    answers: Counter[int] = Counter()
    refused: Counter[int] = Counter()
    after: dict[int, set[str]] = defaultdict(set)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await _stream(session, url, n=-1)  # the whole path once, before the first window
        # The picker's windows renew at multiples of window_s on the monotonic clock, which
        # this process shares: start at one, stop sending just before the last one ends.
        first = math.ceil(time.monotonic() / window_s)
        await asyncio.sleep(first * window_s - time.monotonic())
        stop = (first + windows) * window_s - 0.5

        async def client(worker: int) -> None:
            n = 0
            while (sent := time.monotonic()) < stop:
                n += 1
                window = math.floor(sent / window_s) - first
                status, tokens, retry_after = await _stream(session, url, n=worker * 100_000 + n)
                if status == 200:
                    served[window] += tokens
                    answers[window] += 1
                elif status == 429:
                    refused[window] += 1
                    after[window].add(retry_after)
                    await asyncio.sleep(1.0)

        await asyncio.gather(*(client(w) for w in range(clients)))
    return _table(
        served=served, answers=answers, refused=refused, after=after, budget=budget, n=windows
    )


def _table(
    *,
    served: dict[int, int],
    answers: Counter[int],
    refused: Counter[int],
    after: dict[int, set[str]],
    budget: int,
    n: int,
) -> list[str]:
    lines = [
        "| window | served tokens | of budget | answers | 429s | retry-after (s) |",
        "|---|---|---|---|---|---|",
    ]
    for w in range(n):
        seen = sorted(int(a) for a in after[w] if a.isdigit())
        span = f"{seen[0]}-{seen[-1]}" if seen else "-"
        lines.append(
            f"| {w + 1} | {served[w]:,} | {served[w] / budget:.1%} | {answers[w]} "
            f"| {refused[w]} | {span} |"
        )
    total = sum(served[w] for w in range(n))
    lines += [
        "",
        f"Served {total:,} output tokens for {n} x {budget:,} = {total / (n * budget):.1%}.",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Run it and print (or write) the report."""
    made = entry.parser("token_budget", __doc__)
    made.add_argument("--budget", type=int, default=8000, help="output tokens a window")
    made.add_argument("--window", type=float, default=60.0, help="the budget's window, seconds")
    made.add_argument("--windows", type=int, default=3, help="whole windows of load")
    made.add_argument("--clients", type=int, default=8, help="clients streaming back to back")
    run = entry.start(made, argv)
    args = run.args
    body = asyncio.run(
        _run(budget=args.budget, window_s=args.window, windows=args.windows, clients=args.clients)
    )
    run.finish(
        title="Output-token budget: served tokens per window",
        body=body,
        what=f"tenant a, {args.budget:,} output tokens a {args.window:g} s window",
    )


if __name__ == "__main__":
    main()
