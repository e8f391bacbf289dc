"""The load a server reports with each response (ORCA's ``endpoint-load-metrics`` header),
decoded: one header value -> one ``LoadReport``, or a refusal.

A request that carries ``endpoint-load-metrics-format: TEXT`` (or ``JSON``) is answered by
vLLM, and by Triton's TensorRT-LLM backend, with the server's state when it answered::

    endpoint-load-metrics: TEXT named_metrics.kv_cache_usage_perc=0.25,
                           named_metrics.num_requests_waiting=3.0     (one line)
    endpoint-load-metrics: JSON {"named_metrics": {"kv_cache_usage_perc": 0.25, ...}}

Two named metrics matter here: ``num_requests_waiting`` (the queue, a count) and
``kv_cache_usage_perc`` (a fraction, 0..1, whatever its name says). ORCA's standard fields
(``cpu_utilization``, ``rps_fractional``, ...) and other named metrics are known and left
aside; anything else (``BIN``, an unknown field, a value that is not a finite non-negative
number, a KV fraction above 1) is refused with ``LoadReportError``: a header this build does
not know is not guessed at. Pure: a string in, values out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from xds_control.errors import LoadReportError

__all__ = [
    "FORMAT_HEADER",
    "REPORT_HEADER",
    "LoadReport",
    "parse_load_report",
]

FORMAT_HEADER = "endpoint-load-metrics-format"
"""On a request: the format the server should report its load in (``TEXT`` here)."""
REPORT_HEADER = "endpoint-load-metrics"
"""On a response: the server's load when it answered."""

_WAITING = "num_requests_waiting"
_KV = "kv_cache_usage_perc"
_STANDARD = frozenset(
    {"cpu_utilization", "mem_utilization", "application_utilization", "rps_fractional", "eps"}
)
"""ORCA's own scalar fields: known, not read (vLLM sends none of them)."""
_MAPS = frozenset({"named_metrics", "request_cost", "utilization"})
"""ORCA's maps of named values: only ``named_metrics`` is read."""


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What one response said of its server; ``None``: not reported."""

    waiting: float | None = None
    """Requests queued for a batch slot (count)."""
    kv_usage: float | None = None
    """Fraction of KV-cache blocks in use (0..1)."""


def parse_load_report(value: str) -> LoadReport:
    """The report in an ``endpoint-load-metrics`` header's ``value``; raises
    ``LoadReportError`` for a format, field or value this build does not read."""
    kind, _, body = value.strip().partition(" ")
    if kind == "TEXT":
        named = _text(body)
    elif kind == "JSON":
        named = _json(body)
    else:
        raise LoadReportError(f"endpoint-load-metrics: unknown format {kind[:16]!r}")
    return LoadReport(
        waiting=_number(named, _WAITING, most=math.inf),
        kv_usage=_number(named, _KV, most=1.0),
    )


def _text(body: str) -> dict[str, Any]:
    """``named_metrics.NAME=VALUE, cpu_utilization=VALUE, ...`` -> the named metrics."""
    named: dict[str, Any] = {}
    for pair in body.split(","):
        key, eq, raw = pair.strip().partition("=")
        if not eq:
            raise LoadReportError(f"endpoint-load-metrics: not KEY=VALUE: {pair.strip()[:40]!r}")
        field, dot, name = key.partition(".")
        if not (field in _MAPS and dot and name) and not (field in _STANDARD and not dot):
            raise LoadReportError(f"endpoint-load-metrics: unknown field {key[:40]!r}")
        try:
            number = float(raw)
        except ValueError:
            raise LoadReportError(f"endpoint-load-metrics: {key} is not a number") from None
        if field == "named_metrics":
            named[name] = number
    return named


def _json(body: str) -> dict[str, Any]:
    """``{"named_metrics": {...}, "cpu_utilization": ...}`` -> the named metrics."""
    try:
        report = json.loads(body)
    except ValueError:
        raise LoadReportError("endpoint-load-metrics: JSON that does not parse") from None
    if not isinstance(report, dict):
        raise LoadReportError("endpoint-load-metrics: JSON that is not an object")
    unknown = set(report) - _STANDARD - _MAPS
    if unknown:
        raise LoadReportError(f"endpoint-load-metrics: unknown field {sorted(unknown)[0]!r}")
    named = report.get("named_metrics", {})
    if not isinstance(named, dict):
        raise LoadReportError("endpoint-load-metrics: named_metrics is not an object")
    return named


def _number(named: dict[str, Any], name: str, *, most: float) -> float | None:
    """The named metric, a finite number in 0..``most``; ``None`` when absent."""
    if name not in named:
        return None
    value = named[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise LoadReportError(f"endpoint-load-metrics: {name} is not a number")
    if not (math.isfinite(value) and 0 <= value <= most):
        raise LoadReportError(f"endpoint-load-metrics: {name} out of range: {value!r}")
    return float(value)
