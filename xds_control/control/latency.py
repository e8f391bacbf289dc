"""Each pool's P99 time to first token and time per output token, from Prometheus.

One ``histogram_quantile`` per metric over the engines' own histograms (vLLM, SGLang), by the
label that names an endpoint; a pool's P99 is its worst endpoint's, the pessimistic reading.
A failed query keeps nothing: the limiter then holds its rates (no reading, no change).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from string import Template

import aiohttp
import structlog

from xds_control.config import Config, SignalsConfig
from xds_control.discovery import Endpoint
from xds_control.engine.budgets import Latency
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.prometheus import parse_vector

__all__ = ["LatencySource", "p99_queries"]

log = structlog.get_logger(__name__)

_P99 = "histogram_quantile(0.99, sum by($label, le)(rate(${metric}_bucket[$window])))"
_TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")
_TPOT = ("vllm:inter_token_latency_seconds", "sglang:inter_token_latency_seconds")


def p99_queries(*, label: str, window: str) -> dict[str, str]:
    """``ttft`` and ``tpot`` -> PromQL giving each endpoint's P99 in seconds."""

    def render(metrics: tuple[str, ...]) -> str:
        parts = (Template(_P99).substitute(label=label, metric=m, window=window) for m in metrics)
        return " or ".join(f"({p})" for p in parts)

    return {"ttft": render(_TTFT), "tpot": render(_TPOT)}


class LatencySource:
    """Asks Prometheus for every endpoint's P99s and folds them per pool."""

    def __init__(self, *, client: aiohttp.ClientSession, signals: SignalsConfig) -> None:
        if signals.prometheus_url is None:
            raise ValueError("LatencySource needs signals.prometheus_url")
        self._client = client
        self._url = signals.prometheus_url.rstrip("/") + "/api/v1/query"
        self._timeout = signals.query_timeout_s
        self._mapper = AddressMapper(signals.endpoint_mapping)
        self._label = signals.endpoint_mapping.label
        self.error: str | None = None
        """The last query's failure, ``None`` when it worked."""

    async def fetch(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]], window: str
    ) -> dict[str, Latency]:
        """Pool -> its worst endpoint's P99s; a pool with no reading is left out."""
        by_kind: dict[str, Mapping[str, float]] = {}
        for kind, promql in p99_queries(label=self._label, window=window).items():
            by_kind[kind] = await self._query(promql)
        out: dict[str, Latency] = {}
        for pool in config.pools:
            addresses = [e.address for e in endpoints.get(pool.name, ())]
            ttft = _worst(by_kind["ttft"], addresses)
            tpot = _worst(by_kind["tpot"], addresses)
            if ttft is not None or tpot is not None:
                out[pool.name] = Latency(ttft_p99_s=ttft, tpot_p99_s=tpot)
        return out

    async def _query(self, promql: str) -> Mapping[str, float]:
        try:
            timeout = aiohttp.ClientTimeout(total=self._timeout)
            async with self._client.post(
                self._url, data={"query": promql}, timeout=timeout
            ) as response:
                body = json.loads(await response.read())
            result = parse_vector(body, mapper=self._mapper)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            if message != self.error:
                log.warning("P99 query failed; budgets hold", error=message)
            self.error = message
            return {}
        self.error = None
        return {a: v for a, (v, _at) in result.values.items() if math.isfinite(v) and v >= 0}


def _worst(values: Mapping[str, float], addresses: list[str]) -> float | None:
    found = [values[a] for a in addresses if a in values]
    return max(found) if found else None
