"""Signals from Prometheus: one instant query per signal for the whole fleet, concurrently.

``query_vector`` is the one function that asks Prometheus: the weight engine's signals (and with
them the autoscaling recommendation, which the engine derives from its decisions) go through it
here, the budgets' P99s through it in ``signals.latency``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

from xds_control.config import EndpointMapping, Engine, SignalsConfig
from xds_control.errors import QueryError, SignalError
from xds_control.signals.http import request
from xds_control.signals.mapping import AddressMapper
from xds_control.signals.metrics import QUERIES, QUERY_SECONDS, REJECTED_VALUES
from xds_control.signals.sample import Reading, Sample, Signal, make_reading
from xds_control.signals.source import Target
from xds_control.signals.templates import Query, render_queries

__all__ = ["PrometheusSource", "QueryResult", "parse_vector", "query_vector"]

log = structlog.get_logger(__name__)

SOURCE = "prometheus"


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One query's answer: address -> (raw value, evaluation time). ``unmapped`` counts series
    whose labels named no address (e.g. a DCGM exporter without a mapping)."""

    values: Mapping[str, tuple[float, float]]
    unmapped: int


def _number(raw: object) -> float:
    # Prometheus encodes sample values as strings ("1.5", "NaN", "+Inf") so JSON can carry
    # them; anything else is garbage, surfaced as NaN so the sample rejects it with a reason.
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return math.nan
    return math.nan


def _stamp(raw: object) -> float:
    # An evaluation time is a JSON number; a bool, a string or an integer too large for a float
    # (``1e400`` written out) is garbage, surfaced as NaN so the reading is rejected.
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return math.nan
    try:
        return float(raw)
    except OverflowError:
        return math.nan


def parse_vector(body: Any, *, mapper: AddressMapper) -> QueryResult:
    """Parse an ``/api/v1/query`` JSON body of result type ``vector`` into per-address
    values; raise ``ValueError`` saying what is wrong with anything else."""
    if not isinstance(body, dict):
        raise ValueError(f"body is {type(body).__name__}, not an object")
    if body.get("status") != "success":
        raise ValueError(f"status {body.get('status')!r}: {body.get('error', 'no error text')}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"result type {kind!r}, expected 'vector'")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("data.result is not a list")
    values: dict[str, tuple[float, float]] = {}
    unmapped = 0
    for series in result:
        if not isinstance(series, dict):
            raise ValueError("a series is not an object")
        labels = series.get("metric")
        pair = series.get("value")
        if not isinstance(labels, dict) or not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("a series lacks metric labels or a [time, value] pair")
        if not all(isinstance(v, str) for v in labels.values()):
            raise ValueError("a series has a label value that is not a string")
        address = mapper.address(labels)
        if address is None:
            unmapped += 1
            continue
        at = _stamp(pair[0])
        value = _number(pair[1])
        # Two series on one address (e.g. a regex mapping several GPUs' exporters to one
        # server) keep the larger value: the pessimistic reading for every load signal.
        previous = values.get(address)
        if previous is None or value > previous[0] or math.isnan(previous[0]):
            values[address] = (value, at)
    return QueryResult(values=values, unmapped=unmapped)


class PrometheusSource:
    """``SignalSource`` over the Prometheus HTTP API.

    ``client`` is an ``aiohttp.ClientSession`` the caller owns (and closes). Each ``fetch``
    renders the queries for the engines and TTFT targets among its targets, sends each
    distinct query once (``asyncio.gather``), and maps series to addresses by label.
    """

    def __init__(self, *, client: aiohttp.ClientSession, config: SignalsConfig) -> None:
        if config.prometheus_url is None:
            raise ValueError("PrometheusSource needs config.prometheus_url")
        self._client = client
        self._config = config
        self._url = config.prometheus_url.rstrip("/") + "/api/v1/query"
        self._plans: dict[tuple[Engine, float], dict[Signal, Query]] = {}
        self._mappers: dict[EndpointMapping, AddressMapper] = {}
        self.queries_sent = 0
        """Queries sent since construction (for benchmarks and tests)."""
        # Render every engine once so a bad template override fails at start-up, not mid-run.
        for engine in Engine:
            render_queries(engine=engine, ttft_slo_s=1.0, config=config)

    def plan(self, targets: Collection[Target]) -> dict[str, Query]:
        """The distinct queries one ``fetch`` of ``targets`` sends, keyed by PromQL."""
        queries: dict[str, Query] = {}
        for key in {(t.engine, t.ttft_slo_s) for t in targets}:
            for query in self._plan(*key).values():
                queries.setdefault(query.promql, query)
        return queries

    def _plan(self, engine: Engine, ttft_slo_s: float) -> dict[Signal, Query]:
        key = (engine, ttft_slo_s)
        plan = self._plans.get(key)
        if plan is None:
            plan = render_queries(engine=engine, ttft_slo_s=ttft_slo_s, config=self._config)
            self._plans[key] = plan
        return plan

    def _mapper(self, query: Query) -> AddressMapper:
        mapper = self._mappers.get(query.mapping)
        if mapper is None:
            mapper = self._mappers[query.mapping] = AddressMapper(query.mapping)
        return mapper

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        """Samples for ``targets``; ``SignalError`` only when every query failed."""
        if not targets:
            return {}
        queries = self.plan(targets)
        started = time.perf_counter()
        answers = await asyncio.gather(*(self._run(q) for q in queries.values()))
        QUERY_SECONDS.observe(time.perf_counter() - started)
        results = dict(zip(queries, answers, strict=True))
        if all(answer is None for answer in answers):
            raise SignalError(f"all {len(queries)} Prometheus queries failed ({self._url})")
        return self._samples(targets, results)

    def _samples(
        self, targets: Collection[Target], results: Mapping[str, QueryResult | None]
    ) -> dict[str, Sample]:
        samples: dict[str, Sample] = {}
        for target in targets:
            readings: dict[Signal, Reading] = {}
            rejected: dict[Signal, str] = {}
            for signal, query in self._plan(target.engine, target.ttft_slo_s).items():
                result = results[query.promql]
                if result is None:
                    continue
                found = result.values.get(target.address)
                if found is None:
                    continue
                reading = make_reading(
                    signal=signal, value=found[0], observed_at=found[1], source=SOURCE
                )
                if isinstance(reading, Reading):
                    readings[signal] = reading
                else:
                    rejected[signal] = reading
                    REJECTED_VALUES.labels(SOURCE, signal.value).inc()
            if readings or rejected:
                samples[target.address] = Sample(
                    address=target.address, readings=readings, rejected=rejected
                )
        return samples

    async def _run(self, query: Query) -> QueryResult | None:
        self.queries_sent += 1
        try:
            result = await query_vector(
                self._client,
                url=self._url,
                promql=query.promql,
                timeout_s=self._config.query_timeout_s,
                mapper=self._mapper(query),
            )
        except QueryError as exc:
            QUERIES.labels(query.signal.value, exc.outcome).inc()
            log.warning(
                "prometheus query failed",
                signal=query.signal.value,
                outcome=exc.outcome,
                detail=str(exc),
                url=self._url,
            )
            return None
        QUERIES.labels(query.signal.value, "ok").inc()
        if result.unmapped:
            log.debug("series without an address", signal=query.signal, n=result.unmapped)
        return result


async def query_vector(
    client: aiohttp.ClientSession,
    *,
    url: str,
    promql: str,
    timeout_s: float,
    mapper: AddressMapper,
) -> QueryResult:
    """Send one instant query to ``url`` (``.../api/v1/query``) and parse its vector, or raise
    ``QueryError`` naming the outcome: ``timeout``, ``http``, ``error`` (the transport) or
    ``garbage`` (not a vector). The one way the product asks Prometheus anything."""
    answer = await request(client, url=url, timeout_s=timeout_s, form={"query": promql})
    # JSON is UTF-8 whatever the Content-Type header claims; other bytes are garbage.
    try:
        return parse_vector(_loads(answer.body), mapper=mapper)
    except ValueError as exc:
        start = answer.body[:120].decode("utf-8", errors="replace")
        raise QueryError("garbage", f"{exc}; body starts {start!r}") from exc


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    except RecursionError as exc:  # the C decoder recurses once per nesting level
        raise ValueError("JSON nested too deeply") from exc
