"""Each endpoint's engine as columns: its engine base weight, and whether it times decode steps.

A pool may mix engines (an endpoint entry's ``engine``, a pod's ``xds-control.io/engine``
label); ``config.engine_of`` says which one each endpoint runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from xds_control.config import PER_REQUEST_STEP, Engine, Pool, engine_of
from xds_control.discovery import Endpoint
from xds_control.engine.columns import Column, Mask

__all__ = ["EngineColumns", "engine_columns"]


@dataclass(frozen=True, slots=True)
class EngineColumns:
    """Row ``i`` belongs to ``endpoints[i]``."""

    base: Column
    """The engine base weight of each endpoint's engine."""
    decode_step: Mask
    """Endpoints whose engine exports a decode step (vLLM, SGLang), not only compute time per
    execution (Triton, ONNX Runtime)."""


def engine_columns(pool: Pool, endpoints: Sequence[Endpoint]) -> EngineColumns:
    """The engine columns of ``pool``'s ``endpoints``."""
    bases = {engine: pool.weights.engine_base_weights.of(engine) for engine in Engine}
    engines = [engine_of(pool, endpoint) for endpoint in endpoints]
    n = len(engines)
    return EngineColumns(
        base=np.fromiter((bases[e] for e in engines), dtype=np.float64, count=n),
        decode_step=np.fromiter(
            (e not in PER_REQUEST_STEP for e in engines), dtype=np.bool_, count=n
        ),
    )
