"""A pool that mixes vLLM and Triton endpoints: each endpoint's readings come from its own
dialect's queries, and the queries per cycle are one per signal per engine, never per endpoint."""

from __future__ import annotations

from collections import Counter

import aiohttp
from aiohttp import web

from component.signals.fake_prometheus import serving, vector
from xds_control.config import Engine, Pool, SignalsConfig
from xds_control.discovery import Endpoint
from xds_control.signals import PrometheusSource, Signal, targets_for_pool
from xds_control.signals.templates import render_queries

POOL = Pool(name="chat", engine=Engine.VLLM)


def fleet(n_vllm: int, n_triton: int) -> list[Endpoint]:
    def one(i: int, engine: Engine | None) -> Endpoint:
        host = f"10.0.{i // 250}.{i % 250}"
        return Endpoint(address=f"{host}:8000", host=host, port=8000, weight=10, engine=engine)

    return [one(i, None) for i in range(n_vllm)] + [
        one(n_vllm + i, Engine.TRITON) for i in range(n_triton)
    ]


def test_the_plan_has_one_query_per_signal_per_engine_whatever_the_endpoints() -> None:
    config = SignalsConfig(prometheus_url="http://127.0.0.1:1")
    source = PrometheusSource(client=None, config=config)  # type: ignore[arg-type]  # plan only
    small = source.plan(targets_for_pool(POOL, fleet(2, 1)))
    large = source.plan(targets_for_pool(POOL, fleet(400, 200)))
    assert small.keys() == large.keys()
    per_signal = Counter(q.signal for q in small.values())
    vllm = render_queries(engine=Engine.VLLM, ttft_slo_s=POOL.weights.ttft_slo_s, config=config)
    triton = render_queries(engine=Engine.TRITON, ttft_slo_s=POOL.weights.ttft_slo_s, config=config)
    for signal in set(vllm) | set(triton):
        promqls = {q.promql for q in (vllm.get(signal), triton.get(signal)) if q is not None}
        assert per_signal[signal] == len(promqls), signal  # `up` is one query for both
    assert per_signal[Signal.KV_USAGE] == 2
    assert per_signal[Signal.DECODE_STEP_S] == per_signal[Signal.EXEC_COMPUTE_S] == 1


async def test_each_endpoint_is_read_from_its_own_dialects_queries() -> None:
    endpoints = fleet(2, 1)
    vllm_eps = [e.address for e in endpoints[:2]]
    (triton_ep,) = [e.address for e in endpoints[2:]]
    seen: list[str] = []

    def answer(query: str) -> web.StreamResponse:
        seen.append(query)
        # Prometheus answers each series where it is: every server answers only in its names.
        if query.startswith("max by(instance)(up)"):
            return vector({a: "1" for a in [*vllm_eps, triton_ep]})
        if "vllm:kv_cache_usage_perc" in query:
            return vector({a: "0.25" for a in vllm_eps})
        if "nv_trt_llm_kv_cache_block_metrics" in query:
            return vector({triton_ep: "0.75"})
        if "nv_inference_compute_infer_duration_us" in query:
            return vector({triton_ep: "1.5"})
        if "vllm:inter_token_latency_seconds" in query:
            return vector({a: "0.02" for a in vllm_eps})
        return vector({})

    async with serving(answer) as (_, url), aiohttp.ClientSession() as client:
        source = PrometheusSource(client=client, config=SignalsConfig(prometheus_url=url))
        targets = targets_for_pool(POOL, endpoints)
        samples = await source.fetch(targets)
    assert len(seen) == len(set(seen)) == len(source.plan(targets))
    for address in vllm_eps:
        assert samples[address].value(Signal.KV_USAGE) == 0.25
        assert samples[address].value(Signal.DECODE_STEP_S) == 0.02
        assert Signal.EXEC_COMPUTE_S not in samples[address].values
    triton = samples[triton_ep]
    assert triton.value(Signal.KV_USAGE) == 0.75
    assert triton.value(Signal.EXEC_COMPUTE_S) == 1.5
    assert Signal.DECODE_STEP_S not in triton.values
