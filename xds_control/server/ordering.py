"""Make-before-break on one stream, from what its Envoy has ACKed: which clusters a route table
must wait for, and which dropped clusters must stay while a route may name them.

Pure functions of the stream's per-type state (``state.TypeState``) and the snapshot; both ADS
variants use them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from xds_control.server.state import TypeState
from xds_control.xds import Snapshot
from xds_control.xds import type_urls as urls

__all__ = ["held_clusters", "warming_clusters"]


def warming_clusters(types: Mapping[str, TypeState]) -> frozenset[str]:
    """Clusters Envoy may still be warming, as far as this stream can tell: sent in a CDS
    response not answered yet, or accepted while their endpoints are still to come. A route
    table naming one waits; a rejected cluster or assignment holds nothing up."""
    clusters = types.get(urls.CLUSTER)
    endpoints = types.get(urls.ENDPOINT)
    if clusters is None:
        return frozenset()
    warming = {name for sent in clusters.in_flight.values() for name in sent.entries}
    if endpoints is None:
        return frozenset(warming)  # a client that takes no endpoints over xDS
    # Settled: Envoy has some version (ACKed, named on reconnect, being updated), or rejected it.
    coming = {name for sent in endpoints.in_flight.values() for name in sent.entries}
    settled = endpoints.acked.keys() | (endpoints.sent.keys() - coming) | endpoints.rejected
    for name, prepared in clusters.acked.items():
        if prepared.references - settled:
            warming.add(name)
    return frozenset(warming)


def held_clusters(types: Mapping[str, TypeState], snapshot: Snapshot) -> frozenset[str]:
    """Clusters the snapshot dropped that a route Envoy runs, or is being sent, may name: they
    stay until Envoy has ACKed route tables that no longer name them."""
    clusters = types.get(urls.CLUSTER)
    if clusters is None:
        return frozenset()
    known = snapshot.clusters.resources.keys()
    if clusters.sent.keys() <= known:
        return frozenset()  # nothing dropped, the usual case: no set built
    gone = clusters.sent.keys() - known
    if not gone or not _routes_known(types):
        return frozenset(gone)
    routes = types.get(urls.ROUTE)
    named: set[str] = set()
    if routes is not None:
        for prepared in routes.acked.values():
            named.update(prepared.references)
        for response in routes.in_flight.values():
            for prepared in response.entries.values():
                named.update(prepared.references)
    return frozenset(gone & named)


def _routes_known(types: Mapping[str, TypeState]) -> bool:
    # Whether this stream knows the content of every route table Envoy runs: until then, any
    # cluster Envoy has may still be routed to.
    routes = types.get(urls.ROUTE)
    if routes is not None and routes.names:
        # A table sent but not yet ACKed may be replacing one whose content is unknown.
        return routes.names & routes.sent.keys() <= routes.acked.keys()
    listeners = types.get(urls.LISTENER)
    if listeners is None or not listeners.acked_version:
        return False
    return not any(p.references for p in listeners.acked.values())
