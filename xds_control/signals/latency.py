"""Every endpoint's P99 time to first token and time per output token, from Prometheus.

What the admission budgets adapt to (``xds_control.limits``): one ``histogram_quantile`` per
metric over the engines' own histograms, by the label that names an endpoint, sent through
``query_vector`` as the weight engine's queries are. Each endpoint exports its own engine's
names, so every dialect's histogram is in the one query (joined by ``or``) and each endpoint's
P99 comes from its own: TTFT from vLLM's, SGLang's and Triton's (ONNX Runtime's is Triton's)
first-response histogram (``templates.TTFT_HISTOGRAMS``, Triton's in milliseconds, scaled to
seconds); time per output token from vLLM's and SGLang's (Triton exports none). Per address, as
every source here answers; the limits stage folds the addresses into pools.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from string import Template
from typing import Protocol

import aiohttp
import structlog

from xds_control.config import SignalsConfig
from xds_control.errors import QueryError, SignalError
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.prometheus import QueryResult, query_vector
from xds_control.signals.templates import TTFT_HISTOGRAMS

__all__ = ["FallbackLatency", "LatencySource", "P99Readings", "P99Source", "p99_queries"]

log = structlog.get_logger(__name__)

_P99 = "histogram_quantile(0.99, sum by($label, le)(rate(${metric}_bucket[$window])))"
# Histogram -> seconds per unit, each dialect's once (ONNX Runtime's is Triton's).
_TTFT = {spec.metric: spec.seconds_per_unit for spec in TTFT_HISTOGRAMS.values()}
_TPOT = {"vllm:inter_token_latency_seconds": 1.0, "sglang:inter_token_latency_seconds": 1.0}


def p99_queries(*, label: str, window: str) -> dict[str, str]:
    """``ttft`` and ``tpot`` -> PromQL giving each endpoint's P99 in seconds."""

    def render(metrics: Mapping[str, float]) -> str:
        parts = []
        for metric, seconds_per_unit in metrics.items():
            p99 = Template(_P99).substitute(label=label, metric=metric, window=window)
            parts.append(
                f"({p99})" if seconds_per_unit == 1.0 else f"({p99} * {seconds_per_unit:g})"
            )
        return " or ".join(parts)

    return {"ttft": render(_TTFT), "tpot": render(_TPOT)}


@dataclass(frozen=True, slots=True)
class P99Readings:
    """Address -> its P99 in seconds over one window, per latency; an address left out was not
    measured (no requests in the window: NaN in PromQL, or that query failed)."""

    ttft_s: Mapping[str, float]
    tpot_s: Mapping[str, float]


class P99Source(Protocol):
    """Every endpoint's P99s over a window.

    ``fetch`` raises ``SignalError`` only when it learned nothing (every query failed); the
    limits stage then holds its rates. A latency whose query failed is simply absent."""

    async def fetch(self, *, window: str) -> P99Readings:
        """The P99s over ``window`` (a PromQL range), keyed by endpoint address."""
        ...


class LatencySource:
    """``P99Source`` over the Prometheus HTTP API, as ``SignalSource``'s contract has it: one
    query that fails is logged and leaves its latency unmeasured; ``fetch`` raises
    ``SignalError`` only when both failed. ``client`` is an ``aiohttp.ClientSession`` the
    caller owns."""

    def __init__(self, *, client: aiohttp.ClientSession, signals: SignalsConfig) -> None:
        if signals.prometheus_url is None:
            raise ValueError("LatencySource needs signals.prometheus_url")
        self._client = client
        self._url = signals.prometheus_url.rstrip("/") + "/api/v1/query"
        self._timeout_s = signals.query_timeout_s
        self._mapper = AddressMapper(signals.endpoint_mapping)
        self._label = signals.endpoint_mapping.label

    async def fetch(self, *, window: str) -> P99Readings:
        """Every endpoint's P99s over ``window`` (a PromQL range)."""
        queries = p99_queries(label=self._label, window=window)
        answers = await asyncio.gather(*(self._run(kind, q) for kind, q in queries.items()))
        failed = [a for a in answers if isinstance(a, QueryError)]
        if len(failed) == len(answers):
            detail = "; ".join(f"{e.outcome}: {e}" for e in failed)
            raise SignalError(f"every P99 query failed ({self._url}): {detail}")
        ttft, tpot = (_seconds(a) for a in answers)
        return P99Readings(ttft_s=ttft, tpot_s=tpot)

    async def _run(self, kind: str, promql: str) -> QueryResult | QueryError:
        try:
            return await query_vector(
                self._client,
                url=self._url,
                promql=promql,
                timeout_s=self._timeout_s,
                mapper=self._mapper,
            )
        except QueryError as exc:
            log.warning("P99 query failed", latency=kind, outcome=exc.outcome, detail=str(exc))
            return exc


def _seconds(answer: QueryResult | QueryError) -> dict[str, float]:
    if isinstance(answer, QueryError):
        return {}
    return {a: v for a, (v, _at) in answer.values.items() if math.isfinite(v) and v >= 0}


class FallbackLatency:
    """A ``P99Source`` that asks ``primary`` (the engines' own histograms) and fills every
    endpoint it did not measure from ``fallback`` (the data path); ``primary`` failing whole
    leaves ``fallback``'s readings, logged."""

    def __init__(self, *, primary: P99Source, fallback: P99Source) -> None:
        self._primary = primary
        self._fallback = fallback

    async def fetch(self, *, window: str) -> P99Readings:
        """``primary``'s P99s, with ``fallback``'s for the endpoints it left out."""
        extra = await self._fallback.fetch(window=window)
        try:
            first = await self._primary.fetch(window=window)
        except SignalError as exc:
            log.warning("P99 read failed; the data path's alone", error=str(exc))
            return extra
        return P99Readings(
            ttft_s={**extra.ttft_s, **first.ttft_s}, tpot_s={**extra.tpot_s, **first.tpot_s}
        )
