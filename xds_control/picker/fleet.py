"""What the picker knows about each pool: its settings and its servers as the engine sees them.

The control loop owns both; the picker reads them through three callables, so it needs neither
the loop nor the weigher, and tests hand in plain values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xds_control.config import Config, Engine, engine_of
from xds_control.config.picker import PoolPicker
from xds_control.discovery import Endpoint, Health
from xds_control.engine import WeightDecision
from xds_control.picker.score import Candidate
from xds_control.signals import Signal

__all__ = ["Fleet", "candidates", "picker_addresses"]


def _candidate(endpoint: Endpoint, decision: WeightDecision | None) -> Candidate:
    if decision is None:
        healthy = endpoint.health is Health.HEALTHY
        return Candidate(
            address=endpoint.address, weight=endpoint.weight, healthy=healthy, role=endpoint.role
        )
    why = decision.explanation
    readings = why.sample.readings if why.sample else {}
    waiting, kv = readings.get(Signal.WAITING), readings.get(Signal.KV_USAGE)
    return Candidate(
        address=endpoint.address,
        weight=decision.weight,
        healthy=endpoint.health is Health.HEALTHY and decision.health is Health.HEALTHY,
        speed=decision.state.factors.capacity * why.warmup,
        waiting=0.0 if waiting is None else waiting.value,
        observed_at=None if waiting is None else waiting.observed_at,
        kv_usage=None if kv is None else kv.value,
        kv_observed_at=None if kv is None else kv.observed_at,
        adapters=why.sample.adapters if why.sample else None,
        role=endpoint.role,
    )


def candidates(
    endpoints: Sequence[Endpoint], decisions: Sequence[WeightDecision]
) -> tuple[Candidate, ...]:
    """A pool's servers as the engine sees them: the weight and health EDS publishes (the
    engine's decision when it made one, else discovery's static weight; healthy only when
    both agree), its capacity factor times warm-up as the speed, its last ``waiting``."""
    decided = {d.address: d for d in decisions}
    return tuple(_candidate(e, decided.get(e.address)) for e in endpoints)


def picker_addresses(config: Config) -> list[str]:
    """Where the pools' pickers serve, each once: where ``serve`` listens for Envoy. The
    InferencePools' pools (``inference_pools``) share one, known before any of them exists."""
    addresses = {p.picker.address for p in config.pools if p.picker is not None}
    found = config.inference_pools
    if found is not None and found.picker is not None:
        addresses.add(found.picker.address)
    return sorted(addresses)


@dataclass
class Fleet:
    """The loop's current config, endpoints and the engine's decisions, read on each request;
    the candidates of a pool are rebuilt only when its inputs changed (the loop replaces the
    tuples, never mutates them)."""

    config: Callable[[], Config]
    endpoints: Callable[[], Mapping[str, tuple[Endpoint, ...]]]
    decisions: Callable[[], Mapping[str, tuple[WeightDecision, ...]]]

    def __post_init__(self) -> None:
        self._cache: dict[str, tuple[object, object, tuple[Candidate, ...]]] = {}
        self._uncached: dict[str, tuple[object, object, frozenset[str]]] = {}

    def picker(self, pool: str) -> PoolPicker | None:
        """``pool``'s picker settings; ``None`` for an unknown pool or one without a picker."""
        for each in self.config().pools:
            if each.name == pool:
                return each.picker
        return None

    def sole_pool(self, address: str) -> str | None:
        """The pool whose picker serves at ``address`` when it is the only one there: a
        gateway of the Gateway API Inference Extension runs one picker per pool and names
        none, so a stream to that address is for that pool. ``None`` when none or several
        pools share the address (their streams must name the pool)."""
        pools = [p.name for p in self.config().pools if p.picker and p.picker.address == address]
        return pools[0] if len(pools) == 1 else None

    def without_prefix_cache(self, pool: str) -> frozenset[str]:
        """``pool``'s servers that keep no prefix cache (ONNX Runtime has none): the picker
        claims no prefix on them."""
        config, endpoints = self.config(), self.endpoints().get(pool, ())
        known = self._uncached.get(pool)
        if known is not None and known[0] is config and known[1] is endpoints:
            return known[2]
        found: frozenset[str] = frozenset()
        for each in config.pools:
            if each.name == pool:
                found = frozenset(
                    e.address for e in endpoints if engine_of(each, e) is Engine.ONNXRUNTIME
                )
        self._uncached[pool] = (config, endpoints, found)
        return found

    def candidates(self, pool: str) -> tuple[Candidate, ...]:
        """``pool``'s servers now."""
        endpoints = self.endpoints().get(pool, ())
        decisions = self.decisions().get(pool, ())
        cached = self._cache.get(pool)
        if cached is not None and cached[0] is endpoints and cached[1] is decisions:
            return cached[2]
        built = candidates(endpoints, decisions)
        self._cache[pool] = (endpoints, decisions, built)
        return built
