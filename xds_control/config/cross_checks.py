"""Checks across the config tree that a single field cannot make: names and references."""

from __future__ import annotations

from collections.abc import Iterable

from xds_control.config.address import canonical_address
from xds_control.config.devices import single_device_problem
from xds_control.config.duplicates import duplicates
from xds_control.config.group_checks import check_groups
from xds_control.config.model import Pool, Route
from xds_control.config.root import Config

__all__ = ["NO_POOL", "check_references"]


def _duplicates(names: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return duplicates(names, what="name")


def _single_device(pool: Pool, *, path: str) -> list[tuple[str, str]]:
    """A single-device pool's inline endpoints on one GPU, and a source that can say which:
    a Kubernetes or InferencePool pool's pods are checked at run time (their annotations name
    the GPU), DNS
    addresses carry no identity at all."""
    if not pool.single_device:
        return []
    if pool.dns is not None:
        why = "cannot use dns: an address says nothing of its GPU"
        return [
            (f"{path}.dns", f"single_device {why}; use kubernetes, endpoints or endpoints_file")
        ]
    if pool.kubernetes is not None:
        if pool.kubernetes.pod_metadata:
            return []
        why = "needs kubernetes.pod_metadata: the pods' annotations name each endpoint's GPU"
        return [(f"{path}.kubernetes.pod_metadata", f"single_device {why}")]
    devices = ((e.address, e.device) for e in pool.endpoints)
    problem = single_device_problem(pool=pool.name, endpoints=devices)
    return [(f"{path}.endpoints", problem)] if pool.endpoints and problem is not None else []


def _route_pools(config: Config, route: Route, *, path: str) -> list[tuple[str, str]]:
    """A route's pools must exist; with ``inference_pools`` a name that is no pool of the
    config is taken as an InferencePool's, which exists only at run time."""
    if config.inference_pools is not None:
        return []
    pools = {pool.name for pool in config.pools}
    known = ", ".join(sorted(pools))
    named = [(f"{path}.pool", route.pool)] if route.pool is not None else []
    named += [(f"{path}.pools[{k}].name", share.name) for k, share in enumerate(route.pools)]
    return [
        (where, f"no pool named {name!r} ({known})") for where, name in named if name not in pools
    ]


NO_POOL = ("pools", "give at least one pool, or `inference_pools` to make them")


def check_references(config: Config) -> list[tuple[str, str]]:
    """Return ``(field_path, message)`` for every duplicate name and dangling reference, and
    a config with no pool and nothing to make them."""
    problems = [NO_POOL] if not config.pools and config.inference_pools is None else []
    problems += _duplicates((f"pools[{i}].name", p.name) for i, p in enumerate(config.pools))
    problems += _duplicates(
        (f"listeners[{i}].name", lis.name) for i, lis in enumerate(config.listeners)
    )
    problems += _duplicates(
        (f"listeners[{i}].address", lis.address) for i, lis in enumerate(config.listeners)
    )
    for i, listener in enumerate(config.listeners):
        base = f"listeners[{i}].routes"
        problems += _duplicates(
            (f"{base}[{j}].name", r.name) for j, r in enumerate(listener.routes)
        )
        for j, route in enumerate(listener.routes):
            problems += _route_pools(config, route, path=f"{base}[{j}]")
    for i, pool in enumerate(config.pools):
        addresses = (
            (f"pools[{i}].endpoints[{k}].address", canonical_address(e.address))
            for k, e in enumerate(pool.endpoints)
        )
        problems += duplicates(addresses, what="address")
        problems += _single_device(pool, path=f"pools[{i}]")
    return problems + check_groups(config)
