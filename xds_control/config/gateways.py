"""The gateway fleet: every Envoy that enforces a share of a node group's budgets.

A budget is fleet-wide, and each Envoy runs a bucket of its share. Counting only the Envoys
connected to this process is right for one control plane; behind a Service with two replicas
each sees about half the fleet and would hand out twice the budget. The fleet's size is then
read where every replica reads the same answer: the gateway Service's EndpointSlices, the
addresses a headless Service's name resolves to, or a fixed count.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from xds_control.config.discovery import DnsDiscovery, KubeService
from xds_control.config.strict import StrictModel

__all__ = ["GatewayFleet"]


class GatewayFleet(StrictModel):
    """How many share each budget (the Envoys of a gateway fleet, or the control-plane
    replicas): exactly one of `kubernetes`, `dns` or `count`."""

    kubernetes: KubeService | None = Field(
        default=None,
        description="Count the ready endpoints of the Service (list and watch of its "
        "EndpointSlices; a terminating or not-ready endpoint is not counted; `port` picks the "
        "slices of one port, each endpoint once).",
    )
    dns: DnsDiscovery | None = Field(
        default=None,
        description="Count the addresses these names resolve to (a headless Service's name "
        "resolves to every ready pod).",
    )
    count: int | None = Field(
        default=None, ge=1, le=100_000, description="A fleet of a fixed size."
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        given = [name for name in ("kubernetes", "dns", "count") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of kubernetes, dns or count"
                + (f" (given: {', '.join(given)})" if given else "")
            )
        return self
