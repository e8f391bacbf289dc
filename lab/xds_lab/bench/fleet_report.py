"""What ``fleet_streams`` measures, and the tables it prints."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xds_lab.bench.tables import markdown_table
from xds_lab.loadgen import percentile

__all__ = [
    "FleetResult",
    "memory_lines",
    "process_cpu_s",
    "results_table",
    "rss_mb",
    "rss_table",
]


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(key: str = "VmRSS") -> float:
    """This process's resident set, MB (``VmHWM``: the most it has been)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class FleetResult:
    """Samples in seconds; RSS in MB."""

    ads: str
    """``sotw`` or ``delta``: the protocol every stream, Envoys included, speaks."""
    streams: int
    envoys: int
    endpoints: int
    pools: int
    sync_s: float = 0.0
    ack_s: list[float] = field(default_factory=list)
    first_ack_s: list[float] = field(default_factory=list)
    build_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    """Process CPU (all threads) from before the build to the last ACK."""
    push_cpu_s: list[float] = field(default_factory=list)
    """Process CPU from ``set_snapshot`` to the last ACK: the push alone."""
    clients_cpu_s: list[float] = field(default_factory=list)
    """The light clients' process's CPU over the same span: what answering costs them."""
    timed_changes: int = 0
    """The first ``timed_changes`` samples are back to back; the rest are the soak's."""
    soak_s: float = 0.0
    rss_started_mb: float = 0.0
    """Once the server listens, before any stream."""
    rss_synced_mb: float = 0.0
    rss_sync_peak_mb: float = 0.0
    """The most RSS has been up to the end of the first sync."""
    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    """(seconds into the soak, RSS MB)."""


def _ms(samples: Sequence[float], q: float) -> str:
    return f"{percentile(samples, q) * 1000:.1f}"


def results_table(r: FleetResult) -> str:
    """Markdown: latency and CPU per change, back to back and during the soak."""
    header = ["Phase", "Changes", "last ACK p50 ms", "last ACK p99 ms", "max ms"]
    header += ["first ACK p50 ms", "build p50 ms", "CPU s/push p50", "push-only CPU s p50"]
    header += ["clients CPU s p50"]
    rows = []
    phases = (
        ("back to back", slice(0, r.timed_changes)),
        ("soak, 1/s", slice(r.timed_changes, None)),
    )
    for name, part in phases:
        acks = r.ack_s[part]
        if not acks:
            continue
        rows.append(
            [
                name,
                len(acks),
                _ms(acks, 50),
                _ms(acks, 99),
                f"{max(acks) * 1000:.1f}",
                _ms(r.first_ack_s[part], 50),
                _ms(r.build_s[part], 50),
                f"{percentile(r.cpu_s[part], 50):.3f}",
                f"{percentile(r.push_cpu_s[part], 50):.3f}",
                f"{percentile(r.clients_cpu_s[part], 50):.3f}",
            ]
        )
    return markdown_table(header=header, rows=rows)


def memory_lines(r: FleetResult) -> list[str]:
    """RSS at steady state and through the soak."""
    samples = r.rss_samples
    lines = [
        f"- RSS before any stream: {r.rss_started_mb:.0f} MB; during the first sync "
        f"{r.rss_sync_peak_mb:.0f} MB at most; right after it: {r.rss_synced_mb:.0f} MB"
    ]
    if samples:
        first, last = samples[0][1], samples[-1][1]
        peak = max(mb for _, mb in samples)
        lines.append(
            f"- RSS over a {r.soak_s / 60:.1f} min soak: {first:.0f} MB at its start, "
            f"{last:.0f} MB at its end, {peak:.0f} MB at most "
            f"({len(samples)} samples, every 10 s)"
        )
    return lines


def rss_table(r: FleetResult, *, every_s: float = 60.0) -> str:
    """Markdown: RSS through the soak, a row per ``every_s`` seconds and the last sample, so
    that a slow climb shows as a trend and not only as start, end and peak."""
    rows: list[list[object]] = []
    next_row = 0.0
    for index, (elapsed, mb) in enumerate(r.rss_samples):
        if elapsed >= next_row or index == len(r.rss_samples) - 1:
            rows.append([f"{elapsed / 60:.1f}", f"{mb:.0f}"])
            next_row = (elapsed // every_s + 1) * every_s
    return markdown_table(header=["soak min", "RSS MB"], rows=rows)
