"""What every benchmark prints: a Markdown table, a latency CDF, the machine it ran on, and the
report files it leaves under ``--out``: the table and the JSON it is built from beside each
other, and what one run leaves besides (plots, traces, raw samples) in ``runs_dir(out)``."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["RUNS", "machine_info", "markdown_table", "runs_dir", "write_cdf", "write_report"]

RUNS = "runs"
"""The folder under ``--out`` for what one run leaves beside its table: plots, traces, the raw
samples. ``.gitignore`` ignores it, so a rerun into docs/bench commits tables and the small
JSON they are built from, never a run's artefacts (they once made 22 MB of the repository)."""


def runs_dir(out: Path) -> Path:
    """Where a run writing its report under ``out`` puts its plots, traces and raw samples."""
    return out / RUNS


def _numeric(cell: object) -> bool:
    try:
        float(str(cell))
    except ValueError:
        return False
    return True


def markdown_table(*, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain Markdown table; columns of numbers are right-aligned."""
    align = [
        "---:" if rows and all(_numeric(row[i]) for row in rows) else "---"
        for i in range(len(header))
    ]
    lines = [header, align, *[[str(cell) for cell in row] for row in rows]]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _envoy_version(envoy_bin: Path | None) -> str:
    if envoy_bin is None:
        return "n/a"
    out = subprocess.run(
        [str(envoy_bin), "--version"], capture_output=True, text=True, check=False, timeout=30
    ).stdout
    # "envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL" -> "1.40.0 (<sha>, RELEASE)"
    parts = out.partition("version:")[2].strip().split("/")
    return f"{parts[1]} ({parts[0][:12]}, {parts[3]})" if len(parts) >= 4 else out.strip()


def machine_info(*, envoy_bin: Path | None = None) -> dict[str, str]:
    """CPUs this process may use, CPU model, RAM, OS, Python and (given its binary) Envoy."""
    return {
        "cpus (nproc)": str(len(os.sched_getaffinity(0))),
        "cpu model": _cpu_model(),
        "ram": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "envoy": _envoy_version(envoy_bin),
        # Other work on the same cores moves the numbers; the load says whether there was any.
        "load average at start (1/5/15 min)": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def write_cdf(
    series: Mapping[str, Sequence[float]], *, path: Path, xlabel: str, title: str
) -> None:
    """A PNG with one empirical CDF per series (samples in seconds, plotted in ms, log x)."""
    import matplotlib

    matplotlib.use("Agg")  # benchmarks run on machines without a display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, samples in series.items():
        xs = sorted(s * 1000 for s in samples)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=label)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())  # "20", not "2 x 10^1"
    ax.xaxis.set_minor_formatter(ScalarFormatter())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of samples")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    # Below the axes: the curves span the whole plot, so any corner would hide one.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def write_report(*, out: Path, name: str, lines: Sequence[str], summary: object) -> None:
    """Print the report and write ``name.md`` and ``name.json`` under ``out`` (values JSON
    cannot hold, such as paths, as their text)."""
    print("\n".join(lines))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    (out / f"{name}.json").write_text(json.dumps(summary, indent=1, default=str))
