"""Pools made at run time from the Gateway API Inference Extension's InferencePool objects of a
namespace: each InferencePool that exists is a pool of the same name, its endpoints the ready
pods its selector matches, and it goes when the object goes.

A route names such a pool as it names any other (``pool: NAME`` or in ``pools``), the way an
HTTPRoute names an InferencePool as its backend: the routes stay in the config, the pools come
and go with the objects. A route to a pool that does not exist (yet) is answered by Envoy
without a cluster behind it.
"""

from __future__ import annotations

from pydantic import Field

from xds_control.config.discovery import DNS_LABEL, KubeConnection
from xds_control.config.model import Engine, LoadBalancing
from xds_control.config.picker import PoolPicker

__all__ = ["InferencePoolsDiscovery"]


class InferencePoolsDiscovery(KubeConnection):
    """Every InferencePool (``inference.networking.k8s.io/v1``) of ``namespace`` as a pool,
    listed and watched; what the objects do not say comes from the fields here."""

    namespace: str = Field(
        pattern=DNS_LABEL,
        description="The namespace whose InferencePools become pools (their pods are in it "
        "too). An InferencePool named like a pool of `pools` is left out: the config's wins.",
    )
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Static weight of every endpoint, as `endpoints[].weight`.",
    )
    engine: Engine = Field(
        default=Engine.VLLM,
        description="Engine of the pools' servers, as a pool's `engine` (a pod's label "
        "`xds-control.io/engine` overrides it).",
    )
    lb: LoadBalancing = Field(
        default_factory=LoadBalancing,
        description="Envoy load-balancing policy of each pool, as a pool's `lb`.",
    )
    picker: PoolPicker | None = Field(
        default=None,
        description="The per-request picker for every pool (docs/picker.md), one address "
        "for all of them: Envoy names the pool on each stream. Each pool fails open or closed "
        "as its InferencePool's `endpointPickerRef.failureMode` says (`fail_open` here "
        "only for an object that names no picker). Unset: the pools balance by `lb` with the "
        "engine's weights.",
    )
