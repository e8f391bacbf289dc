"""EndpointSlices (``discovery.k8s.io/v1``, as the API server sends them in JSON) -> endpoints.
Pure.

Per-server facts come first from the slice's own labels: the EndpointSlice controller copies a
Service's labels onto each of its slices, so labelling the Service once describes every server
behind it. What each endpoint's pod says (``pods``: its own labels, and the only
word on its GPU) is put over that, when the pods were read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.health import Health
from xds_control.discovery.kubernetes.pods import (
    PodFacts,
    PodRef,
    apply_pod,
    label_facts,
    pod_ref,
)

__all__ = [
    "SERVICE_NAME_LABEL",
    "SliceError",
    "condition_health",
    "merge_slices",
    "slice_endpoints",
    "slice_pods",
]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class SliceError(ValueError):
    """A slice this pool cannot use (no such port, several ports and none chosen)."""


def condition_health(conditions: Mapping[str, Any] | None) -> Health:
    """EndpointConditions -> EDS health. Terminating drains (in-flight generations finish,
    new requests go elsewhere) rather than vanishing; not ready and not terminating is
    UNHEALTHY (kept, so it comes back with its weight when ready). The API's defaults for
    missing conditions: ready and serving true, terminating false."""
    conditions = conditions or {}
    if conditions.get("terminating") is True:
        return Health.DRAINING
    ready = conditions.get("ready")
    return Health.UNHEALTHY if ready is False else Health.HEALTHY


def _port(ports: Iterable[Mapping[str, Any]], *, want: int | str | None) -> int:
    ports = [p for p in ports if p.get("port") is not None]
    if want is None:
        if len(ports) != 1:
            names = [p.get("name") or p.get("port") for p in ports]
            raise SliceError(f"has ports {names}; set kubernetes.port to choose one")
        return int(ports[0]["port"])
    for port in ports:
        if port.get("name") == want or port.get("port") == want:
            return int(port["port"])
    raise SliceError(f"has no port {want!r}")


def _namespace(item: Mapping[str, Any]) -> str:
    return str((item.get("metadata") or {}).get("namespace") or "")


def slice_pods(item: Mapping[str, Any]) -> tuple[PodRef, ...]:
    """The pods behind a slice's endpoints (those whose targetRef is a Pod)."""
    refs = (pod_ref(entry, namespace=_namespace(item)) for entry in item.get("endpoints") or ())
    return tuple(ref for ref in refs if ref is not None)


def slice_endpoints(
    item: Mapping[str, Any],
    *,
    port: int | str | None,
    weight: int,
    pods: Mapping[str, PodFacts] | None = None,
) -> tuple[Endpoint, ...]:
    """The endpoints of one EndpointSlice; ``SliceError`` for a slice this pool cannot use.
    FQDN slices are skipped (EDS takes IPs); of an endpoint's addresses the first is used, as
    the API documents that they are fungible. ``pods`` (by ``PodRef.key``) holds what the
    pods read say; an endpoint whose pod is not in it keeps the slice's labels alone."""
    if item.get("addressType") not in ("IPv4", "IPv6"):
        return ()
    number = _port(item.get("ports") or (), want=port)
    labels = label_facts((item.get("metadata") or {}).get("labels") or {})
    pods = pods or {}
    out = []
    for entry in item.get("endpoints") or ():
        addresses = entry.get("addresses") or ()
        if not addresses:
            continue
        ip = str(ipaddress.ip_address(addresses[0]))
        endpoint = Endpoint(
            address=f"[{ip}]:{number}" if ":" in ip else f"{ip}:{number}",
            host=ip,
            port=number,
            weight=weight,
            batch_slots=labels.batch_slots,
            health=condition_health(entry.get("conditions")),
            engine=labels.engine,
            gpu_class=labels.gpu_class,
            model=labels.model,
        )
        ref = pod_ref(entry, namespace=_namespace(item))
        out.append(apply_pod(endpoint, pods.get(ref.key) if ref is not None else None))
    return tuple(out)


_RANK = {Health.HEALTHY: 0, Health.DRAINING: 1, Health.UNHEALTHY: 2}


def merge_slices(slices: Mapping[str, tuple[Endpoint, ...]]) -> tuple[Endpoint, ...]:
    """One endpoint per address over all slices (by slice name, sorted: the same state is the
    same tuple). While the controller moves an address between slices it may sit in two; the
    healthier entry wins, so a pod never flaps to draining during the move."""
    best: dict[str, Endpoint] = {}
    for name in sorted(slices):
        for endpoint in slices[name]:
            known = best.get(endpoint.address)
            if known is None or _RANK[endpoint.health] < _RANK[known.health]:
                best[endpoint.address] = endpoint
    return tuple(best[address] for address in sorted(best))
