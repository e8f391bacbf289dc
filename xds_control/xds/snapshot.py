"""An immutable, self-consistent set of xDS resources with content-hash versions.

Each resource is serialised exactly once, when the snapshot is built; every stream that sends
it reuses those bytes. Versions are hashes of the content, so two replicas that compute the
same config publish the same version, and a restarted control plane causes no churn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from google.protobuf.message import Message

from xds_control import __version__
from xds_control.errors import SnapshotError
from xds_control.xds import type_urls
from xds_control.xds.wire import length_delimited

__all__ = ["PreparedResource", "ResourceSet", "Snapshot", "build_snapshot"]

_CONTROL_PLANE = base_pb2.ControlPlane(identifier=f"xds-control/{__version__}").SerializeToString()
# DiscoveryResponse field numbers.
_VERSION, _RESOURCES, _TYPE_URL, _NONCE, _CONTROL_PLANE_FIELD = 1, 2, 4, 5, 6


@dataclass(frozen=True, slots=True)
class PreparedResource:
    """One resource, serialised once: ``framed`` is a ready ``resources`` entry (an ``Any``)."""

    name: str
    message: Message
    framed: bytes
    digest: str


@dataclass(frozen=True, slots=True)
class ResourceSet:
    """All resources of one type, with the type's own version."""

    type_url: str
    version: str
    resources: Mapping[str, PreparedResource]
    header: bytes = field(repr=False)
    """``version_info``, ``type_url`` and ``control_plane``, framed: the start of a response."""

    def response(self, *, names: Iterable[str], nonce: str) -> bytes:
        """A serialised ``DiscoveryResponse`` carrying ``names``: no per-stream serialising."""
        parts = [self.header]
        parts.extend(self.resources[name].framed for name in names)
        parts.append(length_delimited(_NONCE, nonce.encode()))
        return b"".join(parts)


def _name(message: Message) -> str:
    if isinstance(message, endpoint_pb2.ClusterLoadAssignment):
        return str(message.cluster_name)
    return str(getattr(message, "name"))  # noqa: B009 - every other xDS resource has one


def _prepare(type_url: str, messages: Iterable[Message]) -> ResourceSet:
    resources: dict[str, PreparedResource] = {}
    for message in messages:
        name = _name(message)
        if name in resources:
            raise SnapshotError(f"two {type_urls.SHORT_NAMES[type_url]} resources named {name!r}")
        value = message.SerializeToString(deterministic=True)
        # Any{type_url=1, value=2}, framed as DiscoveryResponse.resources.
        any_bytes = length_delimited(1, type_url.encode()) + length_delimited(2, value)
        resources[name] = PreparedResource(
            name=name,
            message=message,
            framed=length_delimited(_RESOURCES, any_bytes),
            digest=hashlib.sha256(value).hexdigest()[:16],
        )
    hasher = hashlib.sha256(type_url.encode())
    for name in sorted(resources):
        hasher.update(f"\0{name}\0{resources[name].digest}".encode())
    version = hasher.hexdigest()[:16]
    header = (
        length_delimited(_VERSION, version.encode())
        + length_delimited(_TYPE_URL, type_url.encode())
        + length_delimited(_CONTROL_PLANE_FIELD, _CONTROL_PLANE)
    )
    return ResourceSet(
        type_url=type_url,
        version=version,
        resources=MappingProxyType(resources),
        header=header,
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The resources one group of Envoys should have, by type URL."""

    version: str
    types: Mapping[str, ResourceSet]

    def resource_set(self, type_url: str) -> ResourceSet:
        """Resources of ``type_url`` (an empty set for a type the snapshot does not hold)."""
        found = self.types.get(type_url)
        return found if found is not None else _prepare(type_url, ())


def _unpack_hcm(listener: listener_pb2.Listener) -> Iterable[str]:
    for chain in listener.filter_chains:
        for network_filter in chain.filters:
            manager = hcm.HttpConnectionManager()
            if network_filter.typed_config.Unpack(manager) and manager.HasField("rds"):
                yield manager.rds.route_config_name


def consistency_problems(types: Mapping[str, ResourceSet]) -> list[str]:
    """Every EDS cluster has its assignment and every assignment its cluster; likewise every
    RDS name a listener asks for exists and every route table is used."""
    problems = []
    clusters = types[type_urls.CLUSTER].resources
    eds_names = {
        name
        for name, prepared in clusters.items()
        if isinstance(prepared.message, cluster_pb2.Cluster)
        and prepared.message.type == cluster_pb2.Cluster.DiscoveryType.EDS
    }
    assignments = set(types[type_urls.ENDPOINT].resources)
    problems += [f"cluster {n!r} has no ClusterLoadAssignment" for n in eds_names - assignments]
    problems += [f"ClusterLoadAssignment {n!r} has no cluster" for n in assignments - eds_names]
    wanted: set[str] = set()
    for prepared in types[type_urls.LISTENER].resources.values():
        assert isinstance(prepared.message, listener_pb2.Listener)
        wanted.update(_unpack_hcm(prepared.message))
    routes = set(types[type_urls.ROUTE].resources)
    problems += [f"route table {n!r} is referenced but missing" for n in wanted - routes]
    problems += [f"route table {n!r} is not referenced" for n in routes - wanted]
    return sorted(problems)


def build_snapshot(
    *,
    clusters: Iterable[cluster_pb2.Cluster],
    load_assignments: Iterable[endpoint_pb2.ClusterLoadAssignment],
    listeners: Iterable[listener_pb2.Listener],
    route_configs: Iterable[route_pb2.RouteConfiguration],
) -> Snapshot:
    """Serialise, hash and check a resource set; ``SnapshotError`` if it is not consistent."""
    types = {
        type_urls.CLUSTER: _prepare(type_urls.CLUSTER, clusters),
        type_urls.ENDPOINT: _prepare(type_urls.ENDPOINT, load_assignments),
        type_urls.LISTENER: _prepare(type_urls.LISTENER, listeners),
        type_urls.ROUTE: _prepare(type_urls.ROUTE, route_configs),
    }
    problems = consistency_problems(types)
    if problems:
        raise SnapshotError("; ".join(problems))
    version = hashlib.sha256(
        "".join(types[t].version for t in type_urls.ORDER).encode()
    ).hexdigest()[:16]
    return Snapshot(version=version, types=MappingProxyType(types))
