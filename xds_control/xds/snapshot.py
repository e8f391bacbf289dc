"""An immutable, self-consistent set of xDS resources with content-hash versions.

Each resource is serialised exactly once, when the snapshot is built; every stream that sends
it reuses those bytes. Versions are hashes of the content, so two replicas that compute the
same config publish the same version, and a restarted control plane causes no churn.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

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

__all__ = [
    "PreparedResource",
    "ResourceSet",
    "Snapshot",
    "build_snapshot",
    "delta_header",
    "delta_response",
    "empty_assignment",
    "sotw_header",
    "sotw_response",
]

_CONTROL_PLANE = base_pb2.ControlPlane(identifier=f"xds-control/{__version__}").SerializeToString()

# The resource's message type: a ResourceSet[Cluster] holds clusters, so readers need no cast.
# Covariant, so that each typed set is also a ResourceSet[Message] in ``Snapshot.types``.
M_co = TypeVar("M_co", bound=Message, covariant=True)
M = TypeVar("M", bound=Message)


@dataclass(frozen=True, slots=True)
class PreparedResource(Generic[M_co]):
    """One resource, serialised once: ``framed`` is a ready state-of-the-world ``resources``
    entry (an ``Any``), ``delta_framed`` a ready incremental one (a ``Resource`` carrying the
    name and ``digest`` as its version)."""

    name: str
    message: M_co
    framed: bytes
    delta_framed: bytes
    digest: str
    references: frozenset[str] = frozenset()
    """What the resource names: a route table's clusters, a listener's route tables, an EDS
    cluster's ClusterLoadAssignment."""


@dataclass(frozen=True, slots=True)
class ResourceSet(Generic[M_co]):
    """All resources of one type, with the type's own version."""

    type_url: str
    version: str
    resources: Mapping[str, PreparedResource[M_co]]
    header: bytes = field(repr=False)
    """``version_info``, ``type_url`` and ``control_plane``, framed: the start of a response."""
    delta_header: bytes = field(repr=False)
    """The same for a ``DeltaDiscoveryResponse`` (``system_version_info``)."""

    def response(self, *, names: Iterable[str], nonce: str) -> bytes:
        """A serialised ``DiscoveryResponse`` carrying ``names``: no per-stream serialising."""
        entries = (self.resources[name] for name in names)
        return sotw_response(header=self.header, entries=entries, nonce=nonce)


def sotw_header(*, type_url: str, version: str) -> bytes:
    """The fields a ``DiscoveryResponse`` starts with."""
    return (
        length_delimited(type_urls.RESPONSE_VERSION_INFO, version.encode())
        + length_delimited(type_urls.RESPONSE_TYPE_URL, type_url.encode())
        + length_delimited(type_urls.RESPONSE_CONTROL_PLANE, _CONTROL_PLANE)
    )


def delta_header(*, type_url: str, version: str) -> bytes:
    """The fields a ``DeltaDiscoveryResponse`` starts with."""
    return (
        length_delimited(type_urls.DELTA_SYSTEM_VERSION_INFO, version.encode())
        + length_delimited(type_urls.DELTA_TYPE_URL, type_url.encode())
        + length_delimited(type_urls.DELTA_CONTROL_PLANE, _CONTROL_PLANE)
    )


def sotw_response(
    *, header: bytes, entries: Iterable[PreparedResource[Message]], nonce: str
) -> bytes:
    """A serialised ``DiscoveryResponse``: prepared header, prepared entries, the nonce."""
    parts = [header, *(entry.framed for entry in entries)]
    parts.append(length_delimited(type_urls.RESPONSE_NONCE, nonce.encode()))
    return b"".join(parts)


def delta_response(
    *,
    header: bytes,
    entries: Iterable[PreparedResource[Message]],
    removed: Iterable[str],
    nonce: str,
) -> bytes:
    """A serialised ``DeltaDiscoveryResponse``: the changed entries and the removed names."""
    parts = [header, *(entry.delta_framed for entry in entries)]
    parts.extend(length_delimited(type_urls.DELTA_REMOVED_RESOURCES, n.encode()) for n in removed)
    parts.append(length_delimited(type_urls.DELTA_NONCE, nonce.encode()))
    return b"".join(parts)


def _name(message: Message) -> str:
    if isinstance(message, endpoint_pb2.ClusterLoadAssignment):
        return str(message.cluster_name)
    return str(getattr(message, "name"))  # noqa: B009 - every other xDS resource has one


def _unpack_hcm(listener: listener_pb2.Listener) -> Iterable[str]:
    for chain in listener.filter_chains:
        for network_filter in chain.filters:
            manager = hcm.HttpConnectionManager()
            if network_filter.typed_config.Unpack(manager) and manager.HasField("rds"):
                yield manager.rds.route_config_name


def _route_clusters(table: route_pb2.RouteConfiguration) -> Iterable[str]:
    for host in table.virtual_hosts:
        for route in host.routes:
            if route.route.cluster:
                yield route.route.cluster
            yield from (w.name for w in route.route.weighted_clusters.clusters)


def _references(message: Message) -> frozenset[str]:
    if isinstance(message, cluster_pb2.Cluster):
        if message.type != cluster_pb2.Cluster.DiscoveryType.EDS:
            return frozenset()
        return frozenset({message.eds_cluster_config.service_name or message.name})
    if isinstance(message, listener_pb2.Listener):
        return frozenset(_unpack_hcm(message))
    if isinstance(message, route_pb2.RouteConfiguration):
        return frozenset(_route_clusters(message))
    return frozenset()


def _prepare_one(type_url: str, message: M) -> PreparedResource[M]:
    name = _name(message)
    value = message.SerializeToString(deterministic=True)
    any_bytes = length_delimited(type_urls.ANY_TYPE_URL, type_url.encode())
    any_bytes += length_delimited(type_urls.ANY_VALUE, value)
    digest = hashlib.sha256(value).hexdigest()[:16]
    entry = (
        length_delimited(type_urls.RESOURCE_NAME, name.encode())
        + length_delimited(type_urls.RESOURCE_VERSION, digest.encode())
        + length_delimited(type_urls.RESOURCE_RESOURCE, any_bytes)
    )
    return PreparedResource(
        name=name,
        message=message,
        framed=length_delimited(type_urls.RESPONSE_RESOURCES, any_bytes),
        delta_framed=length_delimited(type_urls.DELTA_RESOURCES, entry),
        digest=digest,
        references=_references(message),
    )


def _prepare(type_url: str, messages: Iterable[M]) -> ResourceSet[M]:
    resources: dict[str, PreparedResource[M]] = {}
    for message in messages:
        prepared = _prepare_one(type_url, message)
        if prepared.name in resources:
            short = type_urls.SHORT_NAMES[type_url]
            raise SnapshotError(f"two {short} resources named {prepared.name!r}")
        resources[prepared.name] = prepared
    hasher = hashlib.sha256(type_url.encode())
    for name in sorted(resources):
        hasher.update(f"\0{name}\0{resources[name].digest}".encode())
    version = hasher.hexdigest()[:16]
    return ResourceSet(
        type_url=type_url,
        version=version,
        resources=MappingProxyType(resources),
        header=sotw_header(type_url=type_url, version=version),
        delta_header=delta_header(type_url=type_url, version=version),
    )


@functools.lru_cache(maxsize=256)
def empty_assignment(cluster_name: str) -> PreparedResource[endpoint_pb2.ClusterLoadAssignment]:
    """A ClusterLoadAssignment with no endpoints: the answer to an EDS request for a cluster
    this control plane does not know, so that Envoy's cluster finishes warming (empty) instead
    of waiting for ever."""
    message = endpoint_pb2.ClusterLoadAssignment(cluster_name=cluster_name)
    return _prepare_one(type_urls.ENDPOINT, message)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The resources one group of Envoys should have: one typed set per xDS type."""

    clusters: ResourceSet[cluster_pb2.Cluster]
    load_assignments: ResourceSet[endpoint_pb2.ClusterLoadAssignment]
    listeners: ResourceSet[listener_pb2.Listener]
    route_configs: ResourceSet[route_pb2.RouteConfiguration]
    types: Mapping[str, ResourceSet[Message]] = field(init=False, repr=False, compare=False)
    """The same four sets by type URL, for the server, which serves whatever type is asked."""
    version: str = field(init=False)
    """A hash of the four types' versions: the same content, the same version."""

    def __post_init__(self) -> None:
        sets = (self.clusters, self.load_assignments, self.listeners, self.route_configs)
        types = MappingProxyType({s.type_url: s for s in sets})
        versions = "".join(types[t].version for t in type_urls.ORDER)
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "version", hashlib.sha256(versions.encode()).hexdigest()[:16])

    def resource_set(self, type_url: str) -> ResourceSet[Message]:
        """Resources of ``type_url`` (an empty set for a type the snapshot does not hold)."""
        found = self.types.get(type_url)
        return found if found is not None else _prepare(type_url, ())


def consistency_problems(snapshot: Snapshot) -> list[str]:
    """Every EDS cluster has its assignment and every assignment its cluster; likewise every
    RDS name a listener asks for exists and every route table is used."""
    eds_names = {
        name
        for name, prepared in snapshot.clusters.resources.items()
        if prepared.message.type == cluster_pb2.Cluster.DiscoveryType.EDS
    }
    assignments = set(snapshot.load_assignments.resources)
    problems = [f"cluster {n!r} has no ClusterLoadAssignment" for n in eds_names - assignments]
    problems += [f"ClusterLoadAssignment {n!r} has no cluster" for n in assignments - eds_names]
    wanted: set[str] = set()
    for prepared in snapshot.listeners.resources.values():
        wanted.update(prepared.references)
    routes = set(snapshot.route_configs.resources)
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
    snapshot = Snapshot(
        clusters=_prepare(type_urls.CLUSTER, clusters),
        load_assignments=_prepare(type_urls.ENDPOINT, load_assignments),
        listeners=_prepare(type_urls.LISTENER, listeners),
        route_configs=_prepare(type_urls.ROUTE, route_configs),
    )
    if problems := consistency_problems(snapshot):
        raise SnapshotError("; ".join(problems))
    return snapshot
