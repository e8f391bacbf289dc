"""The config the demo, the benchmarks and the end-to-end tests serve: one pool behind one
listener with one route."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["POOL", "one_pool_config"]

POOL = "chat"
"""The pool's (and so Envoy's cluster's) name."""


def one_pool_config(
    *,
    endpoints: Sequence[Mapping[str, Any]],
    listener_port: int,
    pool: Mapping[str, Any] | None = None,
    route: Mapping[str, Any] | None = None,
    signals: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Pool ``chat`` over ``endpoints`` behind listener ``gateway`` on loopback
    ``listener_port``; ``pool`` and ``route`` add fields (engine, lb, weights; match, hash
    policy), ``signals`` turns the weight engine's inputs on."""
    data: dict[str, Any] = {
        "pools": [{"name": POOL, **(pool or {}), "endpoints": [dict(e) for e in endpoints]}],
        "listeners": [
            {
                "name": "gateway",
                "address": f"127.0.0.1:{listener_port}",
                "routes": [{"name": "all", "pool": POOL, **(route or {})}],
            }
        ],
    }
    if signals is not None:
        data["signals"] = dict(signals)
    return data
