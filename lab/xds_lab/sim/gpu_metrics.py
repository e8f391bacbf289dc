"""What the GPU reports, as NVIDIA's DCGM exporter names it: utilisation and framebuffer
memory. The framebuffer in use (weights, KV blocks held, any injected leak) is also what
Triton's own ``nv_gpu_memory_used_bytes`` reports.
"""

from __future__ import annotations

from xds_lab.sim.exposition import Exposition, labels
from xds_lab.sim.profiles import Profile

__all__ = ["MIB", "dcgm_metrics", "fb_used_mib"]

MIB = 1024 * 1024


def fb_used_mib(profile: Profile, *, kv_used_blocks: int, leaked_mib: float) -> float:
    """Framebuffer in use: weights + KV blocks held by running requests + any leak."""
    kv_bytes = kv_used_blocks * 16 * profile.kv_bytes_per_token
    used = (profile.weights_bytes + kv_bytes) / MIB + leaked_mib
    return min(float(profile.gpu_memory_mib), used)


def dcgm_metrics(
    out: Exposition,
    profile: Profile,
    *,
    hostname: str,
    gpu_uuid: str,
    util: float,
    used_mib: float,
) -> None:
    """The ``DCGM_FI_DEV_*`` families for the server's one GPU."""
    rendered = labels(
        {
            "gpu": "0",
            "UUID": gpu_uuid,
            "pci_bus_id": "00000000:00:1E.0",
            "device": "nvidia0",
            "modelName": profile.gpu_dcgm_name,
            "Hostname": hostname,
        }
    )
    out.metric(
        "DCGM_FI_DEV_GPU_UTIL",
        "gauge",
        "GPU utilization (in %).",
        [(rendered, round(util * 100))],
    )
    out.metric(
        "DCGM_FI_DEV_FB_FREE",
        "gauge",
        "Framebuffer memory free (in MiB).",
        [(rendered, round(profile.gpu_memory_mib - used_mib))],
    )
    out.metric(
        "DCGM_FI_DEV_FB_USED",
        "gauge",
        "Framebuffer memory used (in MiB).",
        [(rendered, round(used_mib))],
    )
