"""A pool's endpoints as columns: fresh readings and the state the previous cycle kept.

The engine's arithmetic runs once per column with NumPy instead of once per endpoint in the
interpreter (at 10,000 endpoints that was most of a cycle). This is the one loop over the
endpoints that pulls Python values out of the samples and the previous states.

A missing value is NaN: no fresh reading, or no previous state (or a ``None`` in it).
Readings are validated (``Sample.build``/``make_reading`` reject NaN), so NaN can only mean
"missing".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import cast

import numpy as np

from xds_control.discovery import Endpoint
from xds_control.engine.columns import Column, Mask
from xds_control.engine.decision import EndpointState
from xds_control.engine.speed import FIT, SPEED
from xds_control.signals import Sample, Signal

__all__ = ["SIGNALS", "STATE", "WEIGHT_SIGNALS", "Inputs", "gather"]

_WEIGHT = (
    Signal.DECODE_STEP_S,
    Signal.EXEC_COMPUTE_S,
    Signal.BATCH_SLOTS,
    Signal.WAITING,
    Signal.KV_USAGE,
    Signal.PREFIX_HIT_RATIO,
    Signal.GPU_MEMORY_USED,
    Signal.SLO_TTFT,
    Signal.RUNNING,
    Signal.DATAPATH_STEP_S,
)
WEIGHT_SIGNALS = frozenset(_WEIGHT)
"""Signals that make an endpoint's data fresh; ``up`` or a start time alone do not."""

SIGNALS = (
    *_WEIGHT,
    Signal.UP,
    Signal.ERROR_RATIO,
    Signal.STARTED_AT,
    Signal.PREFILL_RATIO,
    Signal.RUNNING_MEAN,
    Signal.DATAPATH_INFLIGHT,
    Signal.DATAPATH_PROMPT_RATIO,
    Signal.DATAPATH_SLO_TTFT,
)
"""Row order of ``Inputs.fresh``: the weight signals first."""

_NUMBERS = ("smoothed", "weight", "candidate", "candidate_since", "computed_at")
_OPTIONAL = (
    "started_at",
    "warmup_from",
    "first_seen_at",
    *SPEED,
    *FIT,
    "weight_mean",
    "weight_spread",
    "step_scale",
    "slo_compliance",
    "slo_noise",
)
STATE = (*_NUMBERS, *_OPTIONAL)
"""Row order of ``Inputs.state``: the ``EndpointState`` fields read as columns, then the
state's factors."""

_NAN = float("nan")
_NO_NUMBERS = (_NAN,) * (len(_NUMBERS) + 7)
_NO_OPTIONAL = (_NAN,) * len(_OPTIONAL)
_numbers_of = attrgetter(*_NUMBERS)
_optional_of = attrgetter(*_OPTIONAL)
_NONE: dict[Signal, float] = {}


@dataclass(frozen=True, slots=True)
class Inputs:
    """Row ``i`` of every column belongs to ``addresses[i]``."""

    addresses: list[str]
    samples: list[Sample | None]
    previous: list[EndpointState | None]
    fresh: Column
    """Shape (len(SIGNALS), n): fresh readings by signal."""
    state: Column
    """Shape (len(STATE) + 7, n): the previous state's ``STATE`` fields, then its seven factors."""
    fallback_slots: Column
    """Batch slots when none are exported: the endpoint's configured, else the pool's."""
    failures: Column
    """Consecutive failed direct scrapes."""

    def signal(self, signal: Signal) -> Column:
        """The fresh readings of ``signal``."""
        readings: Column = self.fresh[SIGNALS.index(signal)]
        return readings

    def last(self, name: str) -> Column:
        """The previous states' ``name`` (a ``STATE`` field)."""
        values: Column = self.state[STATE.index(name)]
        return values

    @property
    def known(self) -> Mask:
        """Rows with a previous state (its weight is never missing)."""
        weight = self.last("weight")
        known: Mask = weight == weight
        return known

    @property
    def stale(self) -> Mask:
        """Rows with no weight signal fresh."""
        readings = self.fresh[: len(_WEIGHT)]
        stale: Mask = np.all(readings != readings, axis=0)
        return stale

    @property
    def last_factors(self) -> Column:
        """The previous states' factors, shape (7, n), in ``Factors`` field order."""
        return self.state[len(STATE) :]


def _fresh(sample: Sample | None, *, since: float) -> dict[Signal, float]:
    if sample is None:
        return _NONE
    if sample.oldest_at >= since:
        return cast(dict[Signal, float], sample.values)  # built as a dict, and frozen
    return {s: r.value for s, r in sample.readings.items() if r.observed_at >= since}


def gather(
    *,
    endpoints: Sequence[Endpoint],
    samples: Mapping[str, Sample],
    previous: Mapping[str, EndpointState],
    since: float,
    default_slots: float,
) -> Inputs:
    """The readings observed at or after ``since``, and the previous states, as columns."""
    addresses = [endpoint.address for endpoint in endpoints]
    row_samples = list(map(samples.get, addresses))
    prevs = list(map(previous.get, addresses))
    return Inputs(
        addresses=addresses,
        samples=row_samples,
        previous=prevs,
        fresh=_readings(row_samples, since=since),
        state=_state(prevs),
        fallback_slots=np.array(
            [endpoint.batch_slots or default_slots for endpoint in endpoints], dtype=np.float64
        ),
        failures=np.array(
            [0 if s is None else s.scrape_failures for s in row_samples], dtype=np.float64
        ),
    )


def _readings(samples: list[Sample | None], *, since: float) -> Column:
    """The fresh readings, one row per signal of ``SIGNALS``."""
    fresh = [_fresh(sample, since=since) for sample in samples]
    columns = np.empty((len(SIGNALS), len(samples)))
    for row, signal in enumerate(SIGNALS):
        # dict.get through map: the lookups run in C, without an interpreted loop.
        lookups = map(dict.get, fresh, repeat(signal), repeat(_NAN))
        columns[row] = np.fromiter(lookups, dtype=np.float64, count=len(samples))
    return columns


def _state(previous: list[EndpointState | None]) -> Column:
    """The previous states' ``STATE`` fields, then their factors, one row per field."""
    numbers: list[float] = []
    optional: list[float | None] = []
    put_numbers, put_optional = numbers.extend, optional.extend
    for prev in previous:
        if prev is None:
            put_numbers(_NO_NUMBERS)
            put_optional(_NO_OPTIONAL)
        else:
            put_numbers(_numbers_of(prev))
            put_numbers(prev.factors)
            put_optional(_optional_of(prev))
    # The values that may be None apart: one None in a list makes np.array 4x slower.
    by_field = _by_field(numbers, width=len(_NO_NUMBERS))
    maybe = _by_field([_NAN if v is None else v for v in optional], width=len(_OPTIONAL))
    return np.vstack((by_field[: len(_NUMBERS)], maybe, by_field[len(_NUMBERS) :]))


def _by_field(values: list[float], *, width: int) -> Column:
    """Values laid out record by record (``width`` each) as one row per field."""
    flat = np.fromiter(values, dtype=np.float64, count=len(values))
    by_field: Column = flat.reshape(len(values) // width, width).T.copy()
    return by_field
