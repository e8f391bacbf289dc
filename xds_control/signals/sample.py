"""Typed per-endpoint samples: one validated reading per signal, each with when it was observed.

A value is admitted only through ``Sample.build``/``make_reading``: NaN, infinities, negatives
and ratios outside 0..1 are rejected with a reason that stays in the sample (the engine shows it
in ``/v1/weights?explain=1``) instead of flowing silently into the weight math.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["RATIO_SIGNALS", "Adapters", "Reading", "Sample", "Signal", "make_reading"]


class Signal(StrEnum):
    """What the engine can know about an endpoint; units are in each value's comment."""

    RUNNING = "running"
    """Requests in the running batch (count)."""
    RUNNING_MEAN = "running_mean"
    """Requests in the running batch, averaged over the rate window (count): the batch the
    window's decode steps ran with, which an instantaneous ``RUNNING`` only samples."""
    WAITING = "waiting"
    """Requests queued for a batch slot (count)."""
    BATCH_SLOTS = "batch_slots"
    """Batch slots, the engine's max_num_seqs (count); optional."""
    KV_USAGE = "kv_usage"
    """Fraction of KV-cache blocks in use (0..1)."""
    PREFIX_HIT_RATIO = "prefix_hit_ratio"
    """Prefix-cache hits over queries in the rate window (0..1)."""
    DECODE_STEP_S = "decode_step_s"
    """Mean time between output tokens in the rate window (seconds): one decode step (vLLM,
    SGLang), plus the prefills that stalled it (``PREFILL_RATIO`` says how many)."""
    PREFILL_RATIO = "prefill_ratio"
    """Prompt tokens prefilled (prefix-cache hits excluded) per output token in the rate
    window (tokens per token): the prefill work that lengthened the window's decode steps."""
    EXEC_COMPUTE_S = "exec_compute_s"
    """Mean compute time per execution in the rate window (seconds; Triton, ONNX Runtime). For a
    generative model an execution is a whole request, so this is comparable only among
    endpoints that report the same, never with a decode step."""
    GPU_MEMORY_USED = "gpu_memory_used"
    """Fraction of GPU memory in use, used/(used+free) (0..1)."""
    SLO_TTFT = "slo_ttft"
    """Fraction of requests whose time to first token met the pool's target (0..1)."""
    ERROR_RATIO = "error_ratio"
    """Failed requests over all requests in the rate window (0..1)."""
    REQUEST_RATE = "request_rate"
    """Requests finished per second in the rate window (count/s); feeds the autoscaling
    recommendation, not weights."""
    UP = "up"
    """Prometheus' own scrape of the endpoint succeeded (1) or not (0)."""
    STARTED_AT = "started_at"
    """Unix time the server process started (seconds); a later value means a restart."""
    DATAPATH_RATE = "datapath_rate"
    """Requests Envoy sent to the endpoint per second in the data-path window (count/s),
    from Envoy's access log (``signals/data_path.py``): any server, with or without metrics."""
    DATAPATH_REQUESTS = "datapath_requests"
    """Requests in the data-path window the other data-path readings are taken over (count)."""
    DATAPATH_TTFB_S = "datapath_ttfb_s"
    """Mean time from the request's start in Envoy to the endpoint's first response byte in
    the data-path window (seconds): queueing and prefill as the proxy saw them."""
    DATAPATH_STEP_S = "datapath_step_s"
    """Seconds per response byte after the first byte, over the streamed responses of the
    data-path window (total streaming time over total bytes): a decode-step proxy in the
    server's own output format (seconds/byte)."""
    DATAPATH_INFLIGHT = "datapath_inflight"
    """Requests in flight on the endpoint, on average over the data-path window (count): the
    seconds its served requests took, summed, over the window (Little's law)."""
    DATAPATH_PROMPT_RATIO = "datapath_prompt_ratio"
    """Request body bytes per response body byte over the streamed responses of the data-path
    window (bytes per byte): the prompt work behind each output byte, as the proxy sees it
    (prefix-cache hits included: the data path cannot tell them)."""
    DATAPATH_ERROR_RATIO = "datapath_error_ratio"
    """Failed requests (5xx, reset, timeout, no upstream) over all in the data-path window
    (0..1)."""
    DATAPATH_SLO_TTFT = "datapath_slo_ttft"
    """Fraction of the data-path window's requests whose first byte came within the pool's
    TTFT target (0..1), a request still waiting past it counted as a miss: ``SLO_TTFT`` as
    Envoy saw it, for servers whose own histograms nobody reads."""


RATIO_SIGNALS = frozenset(
    {
        Signal.KV_USAGE,
        Signal.PREFIX_HIT_RATIO,
        Signal.GPU_MEMORY_USED,
        Signal.SLO_TTFT,
        Signal.ERROR_RATIO,
        Signal.UP,
        Signal.DATAPATH_ERROR_RATIO,
        Signal.DATAPATH_SLO_TTFT,
    }
)

# Ratios computed from rates can overshoot 1 by float rounding (or by scrape skew between two
# counters); a small overshoot is clamped, a large one means the query is wrong.
_RATIO_SLACK = 0.05


@dataclass(frozen=True, slots=True)
class Reading:
    """One validated value and the Unix time it was observed."""

    value: float
    observed_at: float
    source: str


def make_reading(*, signal: Signal, value: float, observed_at: float, source: str) -> Reading | str:
    """A ``Reading``, or the reason ``value`` is not admissible for ``signal``."""
    if not isinstance(value, float | int) or isinstance(value, bool):
        return f"not a number: {value!r}"
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "infinite"
    if value < 0:
        return f"negative: {value:g}"
    if signal in RATIO_SIGNALS and value > 1:
        if value > 1 + _RATIO_SLACK:
            return f"ratio above 1: {value:g}"
        value = 1.0
    if not math.isfinite(observed_at):
        return "no observation time"
    return Reading(value=value, observed_at=observed_at, source=source)


@dataclass(frozen=True, slots=True)
class Adapters:
    """A server's LoRA adapters as its engine reports them (vLLM's ``vllm:lora_requests_info``,
    its newest series): the adapters its running requests use, those its waiting requests ask
    for, and how many it can hold at once on the GPU (``--max-loras``)."""

    running: frozenset[str]
    waiting: frozenset[str]
    max_lora: int
    observed_at: float
    """When the scrape that reported them was taken (Unix seconds)."""

    @property
    def full(self) -> bool:
        """Every adapter slot holds an adapter that running requests use: one more adapter
        waits until one of them drains."""
        return len(self.running) >= self.max_lora


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything known about one endpoint now: valid readings, and why others were dropped.

    ``scrape_failures`` counts consecutive failed direct scrapes (0 when the endpoint is not
    scraped directly); it feeds health, not weights.
    """

    address: str
    readings: Mapping[Signal, Reading] = field(default_factory=dict)
    rejected: Mapping[Signal, str] = field(default_factory=dict)
    scrape_failures: int = 0
    adapters: Adapters | None = None
    """Its LoRA adapters (a vLLM server scraped directly, once it has loaded one); ``None``:
    not reported."""
    values: Mapping[Signal, float] = field(init=False, repr=False, compare=False)
    """Signal -> value of every reading (derived; lets the engine skip per-reading work)."""
    oldest_at: float = field(init=False, repr=False, compare=False)
    """Observation time of the oldest reading (``inf`` for an empty sample)."""

    def __post_init__(self) -> None:
        # Derived once here, because the engine reads them for every endpoint every cycle.
        readings = self.readings.values()
        object.__setattr__(self, "values", {s: r.value for s, r in self.readings.items()})
        object.__setattr__(
            self, "oldest_at", min((r.observed_at for r in readings), default=math.inf)
        )

    @classmethod
    def build(
        cls,
        *,
        address: str,
        values: Iterable[tuple[Signal, float]],
        observed_at: float,
        source: str,
        scrape_failures: int = 0,
        adapters: Adapters | None = None,
    ) -> Sample:
        """Validate raw ``values`` observed at one time into a sample."""
        readings: dict[Signal, Reading] = {}
        rejected: dict[Signal, str] = {}
        for signal, value in values:
            reading = make_reading(
                signal=signal, value=value, observed_at=observed_at, source=source
            )
            if isinstance(reading, Reading):
                readings[signal] = reading
            else:
                rejected[signal] = reading
        return cls(
            address=address,
            readings=readings,
            rejected=rejected,
            scrape_failures=scrape_failures,
            adapters=adapters,
        )

    def value(self, signal: Signal) -> float | None:
        """The reading's value, or ``None`` when there is none."""
        reading = self.readings.get(signal)
        return None if reading is None else reading.value

    def age(self, signal: Signal, *, now: float) -> float | None:
        """Seconds since ``signal`` was observed, or ``None`` when there is no reading."""
        reading = self.readings.get(signal)
        return None if reading is None else max(0.0, now - reading.observed_at)

    @property
    def observed_at(self) -> float | None:
        """When the freshest reading was observed; ``None`` for an empty sample."""
        if not self.readings:
            return None
        return max(reading.observed_at for reading in self.readings.values())
