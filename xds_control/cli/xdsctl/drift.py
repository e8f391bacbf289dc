"""What an Envoy runs against what it is served: the pure half of ``xdsctl diff``.

Resources are compared by content, not by version: the server resends only resources that
changed, so a resource Envoy runs unchanged keeps an older response's version."""

from __future__ import annotations

from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message

# Envoy's dump carries every typed config we serve (the HTTP filters, the picker's ext_proc,
# the rate limits) as an Any; parsing one needs its message type registered, and the builders'
# modules register exactly the types they serve.
import xds_control.xds  # noqa: F401

__all__ = ["Difference", "differences", "envoy_resources"]

Difference = dict[str, str]
"""``{"type", "name", "problem"}``: one thing Envoy does not run as served."""

_DUMPS = {
    # config_dump section -> (type, list key, how to reach the resource and its name)
    "ClustersConfigDump": ("CDS", "dynamic_active_clusters"),
    "EndpointsConfigDump": ("EDS", "dynamic_endpoint_configs"),
    "ListenersConfigDump": ("LDS", "dynamic_listeners"),
    "RoutesConfigDump": ("RDS", "dynamic_route_configs"),
}
_MESSAGES: dict[str, type[Message]] = {
    "CDS": cluster_pb2.Cluster,
    "LDS": listener_pb2.Listener,
    "RDS": route_pb2.RouteConfiguration,
}


def _resource(kind: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    if kind == "CDS":
        found = entry.get("cluster")
    elif kind == "EDS":
        found = entry.get("endpoint_config")
    elif kind == "LDS":
        found = (entry.get("active_state") or {}).get("listener")
    else:
        found = entry.get("route_config")
    return {k: v for k, v in found.items() if k != "@type"} if found else None


def _name(kind: str, resource: dict[str, Any]) -> str:
    if kind == "EDS":  # Envoy's dump spells fields as in the proto, MessageToDict in camelCase
        return str(resource.get("cluster_name", resource.get("clusterName", "")))
    return str(resource.get("name", ""))


def envoy_resources(config_dump: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Type -> name -> resource JSON, of what Envoy's ``/config_dump?include_eds`` says it runs
    from xDS (static resources are the bootstrap's, not ours)."""
    out: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind, _ in _DUMPS.values()}
    for section in config_dump.get("configs", []):
        kind_key = _DUMPS.get(str(section.get("@type", "")).rsplit(".", 1)[-1])
        if kind_key is None:
            continue
        kind, key = kind_key
        for entry in section.get(key, []):
            resource = _resource(kind, entry)
            if resource is not None:
                out[kind][_name(kind, resource)] = resource
    return out


def _weights(assignment: dict[str, Any]) -> dict[str, int]:
    out = {}
    for locality in assignment.get("endpoints", []):
        for lb in locality.get("lb_endpoints", locality.get("lbEndpoints", [])):
            endpoint = lb.get("endpoint", {})
            sock = endpoint.get("address", {})
            sock = sock.get("socket_address", sock.get("socketAddress", {}))
            port = sock.get("port_value", sock.get("portValue", 0))
            weight = lb.get("load_balancing_weight", lb.get("loadBalancingWeight", 1))
            out[f"{sock.get('address', '')}:{port}"] = int(weight)
    return out


def _same(kind: str, served: dict[str, Any], running: dict[str, Any]) -> str | None:
    """``None`` when Envoy runs what is served; else what differs."""
    if kind == "EDS":
        want, have = _weights(served), _weights(running)
        if want == have:
            return None
        parts = [
            f"{a}: served {want.get(a, '-')}, Envoy {have.get(a, '-')}"
            for a in sorted(want.keys() | have.keys())
            if want.get(a) != have.get(a)
        ]
        return "weights differ: " + "; ".join(parts)
    cls = _MESSAGES[kind]
    try:
        a = ParseDict(served, cls(), ignore_unknown_fields=True)
        b = ParseDict(running, cls(), ignore_unknown_fields=True)
    except ParseError as exc:
        return f"cannot compare: {exc}"
    return None if a == b else "content differs"


def differences(
    served: dict[str, Any], running: dict[str, dict[str, dict[str, Any]]]
) -> list[Difference]:
    """Each resource served (``/v1/snapshot?resources=1``) that Envoy lacks or runs otherwise,
    and each xDS resource Envoy runs that is no longer served."""
    out: list[Difference] = []
    for entry in served["types"]:
        kind = entry["type"]
        have = running.get(kind, {})
        want: dict[str, dict[str, Any]] = {_name(kind, r): r for r in entry.get("resources", [])}
        want = want or {name: {} for name in entry["names"]}
        for name, resource in sorted(want.items()):
            if name not in have:
                out.append({"type": kind, "name": name, "problem": "served, not in Envoy"})
            elif resource and (problem := _same(kind, resource, have[name])):
                out.append({"type": kind, "name": name, "problem": problem})
        for name in sorted(have.keys() - want.keys()):
            out.append({"type": kind, "name": name, "problem": "in Envoy, no longer served"})
    return out
