"""Which GPU (and MIG slice) an endpoint runs on, and the single-device check over a pool.

A pool marked ``single_device`` serves one model from MIG slices of one physical GPU (the
slices share its memory bandwidth and fail together, so weights across them are comparable).
A slice of another GPU in such a pool is a deployment mistake: it is refused, naming the
endpoints, rather than weighted as if it were a peer.

Identity comes from the endpoint's ``device`` (config or endpoints file) or, for Kubernetes
pools, the pod's ``xds-control.io/gpu-uuid`` annotations, spelled as the DCGM
exporter labels its series (``UUID``, ``GPU_I_ID``, ``GPU_I_PROFILE``), so an operator can copy
the values from ``nvidia-smi -L`` or a DCGM series.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["Device", "single_device_problem"]


class Device(StrictModel):
    """The GPU and MIG slice an endpoint runs on."""

    gpu_uuid: str = Field(
        min_length=1,
        description="The physical GPU's UUID (DCGM label UUID, nvidia-smi -L: GPU-...).",
    )
    mig_instance: str | None = Field(
        default=None,
        description="The MIG GPU instance id on that GPU (DCGM label GPU_I_ID); unset: the "
        "whole GPU.",
    )
    mig_profile: str | None = Field(
        default=None,
        description="The MIG profile (DCGM label GPU_I_PROFILE, e.g. 1g.10gb); informational.",
    )


def single_device_problem(
    *, pool: str, endpoints: Iterable[tuple[str, Device | None]]
) -> str | None:
    """Why ``endpoints`` (address, device) cannot form the single-device ``pool``, or ``None``.

    Every endpoint must name its GPU, and all must name the same one. The message lists the
    addresses on each GPU, so the operator sees which ones to move."""
    by_gpu: dict[str, list[str]] = defaultdict(list)
    unknown: list[str] = []
    for address, device in endpoints:
        if device is None:
            unknown.append(address)
        else:
            by_gpu[device.gpu_uuid].append(address)
    problems = []
    if len(by_gpu) > 1:
        spread = "; ".join(f"{gpu}: {', '.join(addrs)}" for gpu, addrs in sorted(by_gpu.items()))
        problems.append(f"MIG slices on {len(by_gpu)} different GPUs ({spread})")
    if unknown:
        problems.append(
            f"no device.gpu_uuid (or pod annotation xds-control.io/gpu-uuid) for "
            f"{', '.join(unknown)}"
        )
    if not problems:
        return None
    return f"pool {pool!r} is single_device but has " + " and ".join(problems)
