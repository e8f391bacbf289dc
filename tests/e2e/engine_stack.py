"""Simulated servers ``s0``, ``s1``, ... in this process behind the harness's ``Stack`` for the
weight engine's end-to-end tests, the engine's config over them, and load through Envoy."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import BaseModel

from xds_control.config.signals import SignalsConfig
from xds_control.config.weights import WeightPolicy
from xds_lab.harness.fleet import local_fleet
from xds_lab.harness.pool_config import one_pool_config
from xds_lab.harness.stack import Stack
from xds_lab.loadgen.runner import run_load
from xds_lab.loadgen.workloads import LoadSpec, build_requests
from xds_lab.sim.fleet import Fleet, ServerSpec

SimStack = Stack[Fleet]


def sim_stack(
    workdir: Path,
    *,
    profiles: list[str],
    overrides: dict[str, Any] | None = None,
    time_scale: float = 1.0,
) -> SimStack:
    """Servers ``s0``, ``s1``, ... with the given profiles (and profile overrides), every
    simulated duration multiplied by ``time_scale``."""
    servers = [
        ServerSpec(name=f"s{i}", profile=p, overrides=overrides or {})
        for i, p in enumerate(profiles)
    ]
    return Stack(workdir=workdir, backends=local_fleet(servers, time_scale=time_scale))


def scaled_engine(
    *, time_scale: float, signals: dict[str, Any], weights: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The engine's clocks for a fleet simulated at ``time_scale``: every duration of the
    signal settings and the weight policy (``*_s``, given or default) multiplied by it, so the
    engine sees in each cycle what it would see at real speed in a cycle ``1/time_scale``
    times as long. Its smoothing and steps count cycles, so they need nothing. Timeouts are
    left alone: they bound IO on this machine, not simulated time."""
    return (
        _scaled(SignalsConfig, signals, time_scale),
        _scaled(WeightPolicy, weights, time_scale),
    )


def _scaled(model: type[BaseModel], given: dict[str, Any], scale: float) -> dict[str, Any]:
    out = dict(given)
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if name in given:
                out[name] = _scaled(kind, given.get(name, {}), scale)
        elif name.endswith("_s") and "timeout" not in name:
            out[name] = given.get(name, field.default) * scale
    return out


def engine_config(
    stack: SimStack,
    *,
    signals: dict[str, Any],
    weights: dict[str, Any],
    servers: list[str] | None = None,
) -> dict[str, Any]:
    """One vLLM pool over ``servers`` (default all) with the engine settings given."""
    addresses = stack.backends.addresses
    names = servers if servers is not None else list(addresses)
    return one_pool_config(
        endpoints=[{"address": addresses[n]} for n in names],
        listener_port=stack.listener_port,
        pool={"engine": "vllm", "weights": weights},
        signals=signals,
    )


async def load(
    stack: SimStack,
    *,
    rate: float,
    seconds: float,
    seed: int = 1,
    input_mean: float = 200,
    output_mean: float = 40,
    stream_fraction: float = 0.0,
) -> Counter[str]:
    """Offer chat load through Envoy; count which server answered each request."""
    spec = LoadSpec(
        rate=rate,
        requests=max(1, int(rate * seconds)),
        seed=seed,
        input_mean=input_mean,
        output_mean=output_mean,
        output_cap=4 * int(output_mean),
        stream_fraction=stream_fraction,
    )
    run = await run_load(stack.url, build_requests(spec), timeout_s=60)
    return Counter(r.server for r in run.results if r.server)


async def routed(stack: SimStack, *, rate: float, seconds: float, seed: int = 1) -> Counter[str]:
    """Offer chat load through Envoy for ``seconds``; count the requests Envoy sent to each
    server (its per-host ``rq_total``, counted as it routes them), without waiting for the
    answers: a slowed server's would take long and say nothing more about where traffic went."""
    before = {name: host.requests for name, host in (await stack.envoy_hosts()).items()}
    load_in_background(stack, rate=rate, seconds=seconds, seed=seed)
    await asyncio.sleep(seconds + 0.5)  # the last request sent and routed
    after = await stack.envoy_hosts()
    return Counter({name: host.requests - before.get(name, 0) for name, host in after.items()})


def load_in_background(stack: SimStack, *, rate: float, seconds: float, **spec: Any) -> None:
    """Start ``load`` as a task (``spec``: its other arguments); the stack's ``close`` cancels
    it."""
    stack.in_background(load(stack, rate=rate, seconds=seconds, **spec), name="load")


async def flood(stack: SimStack, server: str, *, requests: int) -> list[asyncio.Task[Any]]:
    """Send ``requests`` long completions straight to ``server`` (not through Envoy)."""
    session = aiohttp.ClientSession()
    body = json.dumps({"model": "m", "prompt": "flood " * 50, "max_tokens": 400})
    url = f"http://{stack.backends.addresses[server]}/v1/completions"

    async def one() -> None:
        try:
            async with session.post(
                url, data=body, headers={"content-type": "application/json"}
            ) as response:
                await response.read()
        except aiohttp.ClientError:
            pass

    tasks = [asyncio.create_task(one(), name=f"flood-{i}") for i in range(requests)]

    async def close_when_done() -> None:
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()

    stack.in_background(close_when_done(), name="flood-closer")
    return tasks
