"""Settings of the signal sources: Prometheus queries, label mapping and the direct-scrape path.

Kept apart from ``weights.py`` because it names engines (``model.Engine``) while ``model.Pool``
holds a ``WeightPolicy``: one module each avoids an import cycle.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from xds_control.config.model import Engine
from xds_control.config.strict import StrictModel

__all__ = ["DataPathConfig", "EndpointMapping", "ScrapeConfig", "SignalsConfig"]

_DURATION = r"^[1-9][0-9]*(ms|s|m|h)$"


class EndpointMapping(StrictModel):
    """Which series label names the endpoint, optionally rewritten to ``IP:PORT``."""

    label: str = Field(
        default="instance",
        min_length=1,
        description="Prometheus sets `instance` to the scraped host:port, which is the endpoint "
        "address when Prometheus scrapes the server itself.",
    )
    regex: str | None = Field(
        default=None,
        description="Full-match regex applied to the label value; unset keeps it as is. "
        "Example: `(.*):9400` with replacement `$1:8000` maps a DCGM exporter to its server.",
    )
    replacement: str = Field(
        default="$1", description="Result with `$1`.. groups, like Prometheus relabelling."
    )

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"regex {value!r} does not compile: {exc}") from None
        return value


class ScrapeConfig(StrictModel):
    """The direct-scrape fast path: each endpoint's own /metrics, sub-second."""

    enabled: bool = Field(
        default=False,
        description="Off by default: Prometheus is the fleet's metrics engine; turn this on "
        "for queue and KV reactions faster than a Prometheus scrape interval.",
    )
    interval_s: float = Field(
        default=0.5,
        ge=0.05,
        description="Seconds between scrapes of one endpoint; 0.5 s sees a queue spike within "
        "one 1 s reconcile cycle.",
    )
    timeout_s: float = Field(
        default=0.25,
        gt=0,
        description="Per-scrape timeout; a server that cannot answer /metrics in 250 ms is "
        "counted as failing.",
    )
    path: str = Field(default="/metrics", pattern=r"^/", description="Metrics path.")
    window_s: float = Field(
        default=10.0,
        gt=0,
        description="Rates from scrapes (decode step, prefix hits, TTFT SLO, errors) span this "
        "long. A window's mean time between tokens counts each token once, so after a server "
        "slows down its few slow steps weigh little until they fill the window: a server "
        "slowed 4x under prompt-heavy load first lost weight 5-10 s after the fault at 10 s "
        "under weighted MAGLEV (three fleets; 8 s with the picker). 5 s was tried on the "
        "engine before 4 December's line fit (6 s with the picker, 10-11 s with weighted "
        "MAGLEV) and is not the default: on a pool that mixes engines its noisier steps read "
        "the servers timed by the data path (Triton, ONNX "
        "Runtime) slower, and in 3 of 6 seeds weighted MAGLEV's goodput fell to 4.6-6.5 req/s "
        "(at 10 s: 9.5-11.8) (docs/benchmarks.md). Retried after a simulator fix, 5 s made "
        "the fall 5-6 s but read an identical server 30% slow for 12 s with no fault and "
        "raised the mixed fleet's pushes to 8-22 a seed from 2-6.",
    )
    concurrency: int = Field(
        default=64, ge=1, description="Scrapes in flight at once (bounds sockets and CPU)."
    )


class DataPathConfig(StrictModel):
    """Observations from the data path: what Envoy measured per endpoint while serving real
    requests, streamed to the control plane by Envoy's gRPC access-log service."""

    enabled: bool | None = Field(
        default=None,
        description="On, every listener gets a gRPC access log to the control plane over the "
        "bootstrap's xDS cluster (its TLS or Unix socket too), with an entry a second for "
        "each request still running, and each endpoint's sample gains the `datapath_*` "
        "readings: request rate, requests in flight, mean time to first byte, seconds per "
        "streamed byte, request bytes per response byte, error ratio, share of first bytes "
        "within the pool's `ttft_slo_s`. The engine times with them every endpoint that "
        "exports no decode step (Triton, ONNX Runtime, servers with no metrics), on the vLLM "
        "and SGLang servers' scale, judges by them the TTFT of every endpoint whose histogram "
        "it does not read, and weighs routes over pools of different engines. It alone is a "
        "signal source. It adds about "
        "0.5 ms at p99 per request (docs/benchmarks.md). Unset (the default): on exactly when "
        "the config puts servers that time a decode step (vLLM, SGLang) beside servers that "
        "time a whole request (Triton, ONNX Runtime), in one pool or behind one route over "
        "several pools, which have no capacity in common without it; off otherwise. Engines "
        "named only by discovery (an endpoints file, a pod label) are not seen by that rule, "
        "and neither are servers without metrics: set it for those.",
    )
    window_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="The readings span the requests that finished in the last this many "
        "seconds; an endpoint with none in it is forgotten.",
    )

    @property
    def on(self) -> bool:
        """Whether the data path is on: ``enabled`` as loading decided it (an unset value left
        undecided, as in a config built in code, is off)."""
        return self.enabled is True


class SignalsConfig(StrictModel):
    """Where per-endpoint signals come from."""

    prometheus_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="Base URL of Prometheus (or Thanos/Mimir); unset disables the source and "
        "weights fall back to the base weight unless direct scraping is on.",
    )
    query_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="Per-query timeout; below a 1 s cycle x 2 so one slow query costs one cycle.",
    )
    rate_window: str = Field(
        default="1m",
        pattern=_DURATION,
        description="PromQL range for rate(); 1m covers 4 scrapes at Prometheus' 15 s default.",
    )
    endpoint_mapping: EndpointMapping = Field(
        default_factory=EndpointMapping,
        description="Maps engine series to endpoint addresses.",
    )
    gpu_mapping: EndpointMapping = Field(
        default_factory=EndpointMapping,
        description="Maps DCGM exporter series to endpoint addresses (an exporter usually has "
        "its own instance, so set a label or regex here).",
    )
    dcgm: bool = Field(
        default=True, description="Query DCGM exporter metrics for GPU memory headroom."
    )
    templates: dict[Engine, dict[str, str]] = Field(
        default_factory=dict,
        description="Per-engine PromQL overrides: signal name -> query with `$label` and "
        "`$window` placeholders; an empty string disables that signal.",
    )
    scrape: ScrapeConfig = Field(default_factory=ScrapeConfig)
    data_path: DataPathConfig = Field(default_factory=DataPathConfig)
    reconcile_period_s: float = Field(
        default=1.0,
        ge=0.05,
        le=60,
        description="Seconds between weight computations; the fleet model (docs/weights.md) "
        "found 1 s as good as 0.2 s below 80% load, and 5 s hurts near saturation.",
    )
