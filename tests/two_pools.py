"""Two pools behind one listener, and the same config with pool b and its route removed:
snapshots for the stream state machines' tests."""

from __future__ import annotations

from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.discovery import to_endpoints
from xds_control.xds import EndpointWeight, Snapshot

TWO_POOLS = """
pools:
  - {name: a, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: b, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: a, pool: a, match: {prefix: /a}}, {name: b, pool: b}]
"""
ONLY_A = """
pools:
  - {name: a, endpoints: [{address: 127.0.0.1:8001}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes: [{name: a, pool: a}]
"""
ROUTE_TABLE = "gw"


def snapshot(a: int = 10, b: int = 10, *, text: str = TWO_POOLS) -> Snapshot:
    config = parse_config(text=text)
    endpoints = {pool.name: to_endpoints(pool.endpoints) for pool in config.pools}
    weights = {"127.0.0.1:8001": EndpointWeight(a), "127.0.0.1:8002": EndpointWeight(b)}
    return reconcile_once(ReconcileInputs(config=config, endpoints=endpoints, weights=weights))
