"""Whose certificate opened a stream, and whether it may speak for the node it names.

The rule (``tls.verify_node_id``): the client certificate must carry a SAN URI that equals the
node id or ends in ``/<node id>`` (a SPIFFE id such as ``spiffe://example.org/ns/llm/envoy-0``
names node ``envoy-0``), or a SAN DNS name equal to the node id. The common name is not used:
it is not an identity any modern issuer promises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import grpc
from envoy.config.core.v3 import base_pb2

__all__ = ["NodeCheck", "certificate_names", "names_node", "node_named_by_certificate"]

NodeCheck = Callable[[base_pb2.Node, "grpc.aio.ServicerContext[Any, Any]"], str | None]
"""Given a stream's node and its context: ``None`` to accept, else why it is refused."""

_SAN_KEYS = ("peer_uri", "peer_dns", "x509_subject_alternative_name")
"""gRPC's auth-context properties that hold SANs: by kind in recent releases, all of them
(DNS, URI, IP, e-mail) under the last in every release."""


def certificate_names(auth: Mapping[str, Iterable[bytes]]) -> set[str]:
    """The SAN values of the peer's certificate, from gRPC's auth context."""
    return {value.decode(errors="replace") for key in _SAN_KEYS for value in auth.get(key, ())}


def names_node(names: Iterable[str], node_id: str) -> bool:
    """Whether one of ``names`` is ``node_id`` or a URI whose last segment is ``node_id``."""
    return any(name == node_id or (":" in name and name.endswith("/" + node_id)) for name in names)


def node_named_by_certificate(
    node: base_pb2.Node, context: grpc.aio.ServicerContext[Any, Any]
) -> str | None:
    """A ``NodeCheck``: the node id must be one of its client certificate's names."""
    names = certificate_names(context.auth_context())
    if not names:
        return f"node {node.id!r}: no client certificate names it (mutual TLS with SANs needed)"
    if names_node(names, node.id):
        return None
    return f"node {node.id!r} is not named by its client certificate (SANs: {sorted(names)})"
