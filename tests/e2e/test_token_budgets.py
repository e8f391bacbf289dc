"""Output-token budgets through a real Envoy over simulated vLLM servers (issue 25, must-show 4,
in short windows; `make bench`'s three minutes are the long form): a tenant with a budget of T
output tokens per window is served about T a window, counted from the streamed responses'
own usage, which the picker reads from the response bodies Envoy sends it; over budget it is
answered 429 `token-budget` with the seconds to the next window; another tenant is not
limited."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from e2e.engine_stack import sim_stack
from e2e.stack import eventually
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.ports import free_port

WINDOW_S = 3.0
BUDGET = 2560  # output tokens a window: 20 of the simulator's default 128-token answers
WINDOWS = 3
TENANT_HEADER = "x-gateway-inference-fairness-id"


def _config(addresses: list[str], *, listener_port: int, picker: str) -> dict[str, Any]:
    budget = {"tenant": "a", "output_tokens": BUDGET, "window_s": WINDOW_S}
    return one_pool_config(
        endpoints=[{"address": a} for a in addresses],
        listener_port=listener_port,
        pool={"picker": {"address": picker, "flow": {"budgets": [budget]}}},
    )


async def _stream(
    session: aiohttp.ClientSession, url: str, *, tenant: str, n: int
) -> tuple[int, int, dict[str, str]]:
    """Status, the output tokens the stream's usage reported, and the response's headers. No
    ``max_tokens``: the picker charges its default estimate (256) and the usage (128) settles."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"tell me about {n}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with session.post(url, json=body, headers={TENANT_HEADER: tenant}) as response:
        text = await response.text()
        tokens = 0
        for line in text.splitlines():
            if line.startswith("data:") and '"usage"' in line:
                usage = json.loads(line[5:])["usage"]
                if usage:
                    tokens = int(usage["completion_tokens"])
        return response.status, tokens, {k.lower(): v for k, v in response.headers.items()}


async def _xdsctl_limits(admin_url: str) -> str:
    xdsctl = Path(sys.executable).with_name("xdsctl")
    process = await asyncio.create_subprocess_exec(
        str(xdsctl),
        "--server",
        admin_url,
        "limits",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return out.decode()


@pytest.mark.serial  # tokens counted per window of the control plane's clock: not next to load
async def test_a_tenant_is_served_about_its_budget_a_window_and_told_when_it_renews(
    tmp_path: Path,
) -> None:
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-h100"], time_scale=0.05)
    picker = f"127.0.0.1:{free_port()}"
    try:
        addresses = list(stack.backends.addresses.values())  # ports pinned before start
        await stack.start(_config(addresses, listener_port=stack.listener_port, picker=picker))
        url = f"{stack.url}/v1/chat/completions"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            # Warm: a request of tenant b (no budget) goes through the whole path first.
            status, tokens, _ = await _stream(session, url, tenant="b", n=0)
            assert (status, tokens) == (200, 128)
            # The windows renew at multiples of WINDOW_S on the control plane's monotonic
            # clock, which is this process's: start at one, stop sending just before the
            # third after it ends, so exactly WINDOWS windows are charged.
            start = math.ceil(time.monotonic() / WINDOW_S) * WINDOW_S
            await asyncio.sleep(start - time.monotonic())
            stop = start + WINDOWS * WINDOW_S - 0.3
            served = 0
            statuses: Counter[int] = Counter()
            refusals: set[tuple[str, str]] = set()

            async def client(worker: int) -> None:
                nonlocal served
                n = 0
                while time.monotonic() < stop:
                    n += 1
                    status, tokens, headers = await _stream(
                        session, url, tenant="a", n=worker * 1000 + n
                    )
                    statuses[status] += 1
                    served += tokens if status == 200 else 0
                    if status == 429:
                        refusals.add(
                            (headers.get("x-xds-control-flow", ""), headers.get("retry-after", ""))
                        )
                        await asyncio.sleep(0.05)

            await asyncio.gather(*(client(w) for w in range(6)))
            # What an operator sees of it: the window, its charge and when it renews.
            view = await stack.control_plane.get_json("/v1/limits")
            rows = [r for r in view["token_budgets"] if r["tenant"] == "a"]
            assert [(r["pool"], r["budget"], r["output_tokens"]) for r in rows] == [
                ("chat", "a/all", BUDGET)
            ], view
            assert rows[0]["left"] == max(0, BUDGET - rows[0]["charged"]), rows
            assert 0 < rows[0]["renews_in_s"] <= WINDOW_S, rows
            table = await _xdsctl_limits(stack.control_plane.admin_url)
            line = next(x for x in table.splitlines() if "a/all" in x)
            assert line.split()[:5] == ["chat", "a/all", "a", f"{WINDOW_S:g}s", str(BUDGET)], table
            # Tenant b, with no budget, is still served while a is over its own.
            others = await asyncio.gather(
                *(_stream(session, url, tenant="b", n=i) for i in range(5))
            )
            assert [status for status, _, _ in others] == [200] * 5
        want = BUDGET * WINDOWS
        assert 0.9 * want <= served <= 1.1 * want, (served, statuses)
        assert statuses[429] > 0, statuses
        assert {reason for reason, _ in refusals} == {"token-budget"}, refusals
        assert all(1 <= int(after) <= math.ceil(WINDOW_S) for _, after in refusals), (
            refusals,
            statuses,
        )
        # The picker counted what the responses said, through Envoy's response bodies (the
        # last stream's count settles as its ext_proc stream closes, just after the client's).
        pattern = re.compile(
            r'^xds_control_flow_output_tokens_total\{budget="a/all",pool="chat"\} (\S+)$',
            re.MULTILINE,
        )

        async def counted_what_the_clients_did() -> bool:
            match = pattern.search(await stack.control_plane.metrics())
            return match is not None and float(match[1]) == served

        await eventually(counted_what_the_clients_did, timeout=10, what=f"{served} tokens counted")
        metrics = await stack.control_plane.metrics()
        assert 'outcome="token-budget"' in metrics
    finally:
        await stack.close()
