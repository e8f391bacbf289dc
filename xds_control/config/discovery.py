"""Where a pool's endpoints come from besides the config itself: a Kubernetes Service's
EndpointSlices, the pods a Gateway API Inference Extension InferencePool selects, or host names
resolved through DNS."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from xds_control.config.strict import StrictModel

__all__ = [
    "DNS_LABEL",
    "DnsDiscovery",
    "HostNamePort",
    "InferencePoolDiscovery",
    "KubeConnection",
    "KubeService",
    "KubernetesDiscovery",
    "parse_host_name_port",
]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A Kubernetes namespace or Service name (RFC 1123 label)."""

_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$")


def parse_host_name_port(value: str) -> tuple[str, int]:
    """Split ``NAME:PORT`` (a DNS name or an IP literal, IPv6 in brackets); raise ``ValueError``
    with a plain reason for anything else."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{value!r} is not NAME:PORT")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"port {port_text!r} in {value!r} is not in 1..65535")
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1])), int(port_text)
        except ValueError:
            raise ValueError(f"{host!r} in {value!r} is not an IPv6 address") from None
    name = host.removesuffix(".")
    if len(name) > 253 or not all(_HOST_LABEL.match(label) for label in name.split(".")):
        raise ValueError(f"{host!r} in {value!r} is not a host name")
    return name, int(port_text)


def _check(value: str) -> str:
    parse_host_name_port(value)
    return value


HostNamePort = Annotated[str, AfterValidator(_check)]


class KubeConnection(StrictModel):
    """How a Kubernetes source reaches the API server and keeps its watches: the fields every
    Kubernetes source shares."""

    kubeconfig: Path | None = Field(
        default=None,
        description="Kubeconfig file. Unset: in a pod the service account (token and CA under "
        "/var/run/secrets/kubernetes.io/serviceaccount), elsewhere $KUBECONFIG or "
        "~/.kube/config.",
    )
    context: str | None = Field(
        default=None, description="Kubeconfig context; unset: its current-context."
    )
    watch_timeout_s: int = Field(
        default=300,
        ge=1,
        le=3600,
        description="Each watch asks the API server to end it after this long and is then "
        "renewed from the last resourceVersion; 5 minutes is what kubectl and informers use.",
    )
    relist_backoff_s: float = Field(
        default=1.0,
        gt=0,
        le=300,
        description="Wait before listing again after a failed list or a broken watch (doubling "
        "up to 30 s while it keeps failing), so an unreachable API server is not hammered.",
    )
    first_list_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="How long the first reconcile waits for the first list; after that the "
        "pool is served empty until the list arrives (the failure shows in discovery_errors).",
    )


class KubeService(KubeConnection):
    """A Kubernetes Service, read from its EndpointSlices (list, then watch)."""

    namespace: str = Field(pattern=DNS_LABEL, description="The Service's namespace.")
    service: str = Field(
        pattern=DNS_LABEL,
        description="The Service's name: its EndpointSlices carry the label "
        "`kubernetes.io/service-name` with it.",
    )
    port: int | str | None = Field(
        default=None,
        description="Which port of the slices to use: its name or number. Unset: the "
        "slices' only port (a slice with several is then skipped, with an error in the log).",
    )


class KubernetesDiscovery(KubeService):
    """The endpoints of a Kubernetes Service, read from its EndpointSlices (list, then watch)."""

    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Static weight of every endpoint, as `endpoints[].weight`.",
    )
    pod_metadata: bool = Field(
        default=True,
        description="Read the pod behind each endpoint (one GET per new pod, needs RBAC get on "
        "pods): its labels `xds-control.io/engine`, `gpu-class`, `model`, `batch-slots` "
        "override the Service's, and its annotations `xds-control.io/gpu-uuid`, "
        "`mig-instance`, `mig-profile` give its GPU (what `single_device` checks), and its "
        "annotations `xds-control.io/kv-events-port`, `kv-replay-port` (else its container "
        "ports named `kv-events`, `kv-replay`) its KV-event ports. A 403 is "
        "logged and the Service's labels are used. Off: the Service's labels only, no pod "
        "reads.",
    )


_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
"""A Kubernetes object name such as an InferencePool's (RFC 1123 subdomain)."""


class InferencePoolDiscovery(KubeConnection):
    """The endpoints of a Gateway API Inference Extension ``InferencePool``
    (``inference.networking.k8s.io/v1``): the ready pods its selector matches, on its target
    ports (list, then watch, of the pool and of its pods)."""

    namespace: str = Field(
        pattern=DNS_LABEL, description="The InferencePool's namespace (its pods are in it too)."
    )
    name: str = Field(
        pattern=_DNS_SUBDOMAIN,
        description="The InferencePool's name. Until it exists the pool has no endpoints and "
        "the wait shows in discovery_errors; its selector and targetPorts are followed as they "
        "change.",
    )
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Static weight of every endpoint, as `endpoints[].weight`.",
    )


class DnsDiscovery(StrictModel):
    """Host names resolved by the control plane; every address of a name is an endpoint."""

    hosts: tuple[HostNamePort, ...] = Field(
        min_length=1,
        description="`NAME:PORT` entries (e.g. `vllm-0.internal:8000`); each A and AAAA "
        "address becomes an endpoint on that port.",
    )
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Static weight of every address, as `endpoints[].weight`.",
    )
    batch_slots: int | None = Field(
        default=None,
        ge=1,
        description="Batch slots of every server, as `endpoints[].batch_slots`.",
    )
    refresh_s: float = Field(
        default=30.0,
        ge=0.1,
        le=86_400,
        description="Seconds between resolutions of a name that resolved: short enough that a "
        "replaced server is seen within a minute, long enough not to load the resolver.",
    )
    retry_s: float = Field(
        default=5.0,
        ge=0.1,
        le=3_600,
        description="Seconds before resolving a name again after a failure; its last good "
        "addresses are served meanwhile.",
    )
    timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="A resolution taking longer counts as failed (the system resolver's own "
        "default is 5 s per try).",
    )
