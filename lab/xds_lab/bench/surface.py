"""Context-length response surface: one simulated server, prompt length x concurrency.

Closed loop, no Envoy: ``concurrency`` clients each send the next request as soon as the last
one finished, every prompt exactly ``prompt`` tokens of fresh text (no prefix hits) and every
answer ``output_tokens`` long, streamed. Per cell: TTFT percentiles and output tokens/s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from xds_lab.loadgen import LoadSpec, build_requests, percentile
from xds_lab.loadgen.client import Result, send
from xds_lab.sim.profiles import get_profile
from xds_lab.sim.server import SimServer

__all__ = ["run_surface", "write_heatmaps"]

_ROUNDS = 3


async def _cell(
    server: SimServer, *, prompt: int, concurrency: int, seconds: float, output_tokens: int
) -> dict[str, Any]:
    spec = LoadSpec(
        workload="chat",
        rate=1.0,  # unused: the loop below is closed, not Poisson
        requests=max(4 * concurrency, 64),
        seed=prompt * 100 + concurrency,
        input_mean=prompt,
        input_sigma=0.0,
        input_cap=prompt,
        output_mean=output_tokens,
        output_sigma=0.0,
        output_cap=output_tokens,
        stream_fraction=1.0,
    )
    plan = build_requests(spec)
    results: list[Result] = []
    deadline = time.monotonic() + seconds
    start = time.monotonic()

    async def client(worker: int, http: aiohttp.ClientSession) -> None:
        i = worker
        # At least _ROUNDS requests each: the first round all arrive at once (a burst), later
        # ones arrive as others finish, which is the steady state a closed loop measures.
        while time.monotonic() < deadline or i < worker + _ROUNDS * concurrency:
            req = plan[i % len(plan)]
            results.append(await send(http, server.url, req, scheduled=0.0, timeout_s=60))
            i += concurrency

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        await asyncio.gather(*(client(w, http) for w in range(concurrency)))
    span = time.monotonic() - start
    ok = [r for r in results if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    return {
        "prompt_tokens": prompt,
        "concurrency": concurrency,
        "requests": len(results),
        "ok": len(ok),
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p99_s": percentile(ttft, 99),
        "output_tokens_per_s": sum(r.output_tokens for r in ok) / span,
    }


async def run_surface(
    *,
    profile: str = "vllm-h100",
    prompts: Sequence[int] = (512, 1024, 2048, 4096),
    concurrency: Sequence[int] = (1, 2, 4, 8, 16, 32),
    seconds: float = 3.0,
    output_tokens: int = 128,
) -> list[dict[str, Any]]:
    """Every (prompt, concurrency) cell against a fresh server (cold cache per cell)."""
    cells = []
    for prompt in prompts:
        for n in concurrency:
            server = SimServer(name="surface", profile=get_profile(profile), seed=prompt + n)
            await server.start()
            try:
                cells.append(
                    await _cell(
                        server,
                        prompt=prompt,
                        concurrency=n,
                        seconds=seconds,
                        output_tokens=output_tokens,
                    )
                )
            finally:
                await server.stop()
    return cells


def write_heatmaps(cells: Sequence[dict[str, Any]], *, path: Path, title: str) -> None:
    """Two heatmaps side by side: TTFT p50 (ms) and output tokens/s, values in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prompts = sorted({c["prompt_tokens"] for c in cells})
    conc = sorted({c["concurrency"] for c in cells})
    by = {(c["prompt_tokens"], c["concurrency"]): c for c in cells}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    panels = (("ttft_p50_s", 1000.0, "TTFT p50 (ms)"), ("output_tokens_per_s", 1.0, "output tok/s"))
    for ax, (key, factor, label) in zip(axes, panels, strict=True):
        grid = [[by[(p, n)][key] * factor for n in conc] for p in prompts]
        image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                ax.text(j, i, f"{value:.0f}", ha="center", va="center", color="w", fontsize=8)
        ax.set_xticks(range(len(conc)), [str(n) for n in conc])
        ax.set_yticks(range(len(prompts)), [str(p) for p in prompts])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("prompt tokens")
        ax.set_title(label)
        fig.colorbar(image, ax=ax)
    fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
