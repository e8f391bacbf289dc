"""A scenario result as a Markdown table (``<name>.md``) and PNG plots (matplotlib)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["points_table", "write_report"]

_HEADER = (
    "policy",
    "load",
    "offered req/s",
    "TTFT p50 ms",
    "TTFT p90 ms",
    "TTFT p99 ms",
    "TPOT p99 ms",
    "E2E p99 s",
    "req/s",
    "out tok/s",
    "goodput req/s",
    "prefix hit",
    "errors (timeouts)",
    "EDS pushes",
)


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.0f}"


def _row(p: dict[str, Any]) -> list[str]:
    name = f"**{p['policy']}**" if p["ours"] else p["policy"]
    return [
        name,
        f"{p['load']:.0%}",
        f"{p['offered_rps']:.2f}",
        _ms(p["ttft_p50_s"]),
        _ms(p["ttft_p90_s"]),
        _ms(p["ttft_p99_s"]),
        _ms(p["tpot_p99_s"]),
        "n/a" if math.isnan(p["e2e_p99_s"]) else f"{p['e2e_p99_s']:.1f}",
        f"{p['throughput_rps']:.2f}",
        f"{p['output_tokens_per_s']:.0f}",
        f"{p['goodput_rps']:.2f}",
        f"{p['prefix_hit_ratio']:.2f}",
        f"{p['errors']} ({p['timeouts']})",
        f"{p['eds_pushes']:.0f}",
    ]


def points_table(points: Sequence[dict[str, Any]]) -> str:
    """One row per (load, policy), grouped by load; our policies in bold."""
    ordered = sorted(points, key=lambda p: (p["load"], 0))
    lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * 2 + "---:|" * (len(_HEADER) - 2)]
    lines += ["| " + " | ".join(_row(p)) + " |" for p in ordered]
    return "\n".join(lines)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # benchmarks run without a display
    import matplotlib.pyplot as plt

    return plt


def _latency_vs_load(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for p in result["points"]:
        by_policy.setdefault(p["policy"], []).append(p)
    for name, pts in by_policy.items():
        pts.sort(key=lambda p: p["load"])
        style = "-" if pts[0]["ours"] else "--"
        loads = [p["load"] * 100 for p in pts]
        axes[0].plot(loads, [p["ttft_p99_s"] for p in pts], style, marker="o", label=name)
        axes[1].plot(loads, [p["goodput_rps"] for p in pts], style, marker="o", label=name)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("TTFT p99 (s, log)")
    axes[1].set_ylabel("goodput (req/s within SLO)")
    for ax in axes:
        ax.set_xlabel("offered load (% of measured capacity)")
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(loc="upper left", fontsize=8)
    fig.suptitle(f"{result['scenario']['name']}: latency and goodput vs load")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _cdf(result: dict[str, Any], path: Path) -> float:
    """TTFT CDFs at the load level closest to 80%; returns that level."""
    plt = _pyplot()
    loads: list[float] = sorted({float(p["load"]) for p in result["points"]})
    level = min(loads, key=lambda x: abs(x - 0.8))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in result["points"]:
        if p["load"] != level or not p["ttft_s"]:
            continue
        xs = p["ttft_s"]
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, "-" if p["ours"] else "--", where="post", label=p["policy"])
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s, log)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{result['scenario']['name']}: TTFT CDF at {level:.0%} load")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return level


def _weights(result: dict[str, Any], path: Path) -> None:
    """Envoy's weights over time, one panel per engine-weight policy, one line per server."""
    plt = _pyplot()
    ours = [p for p in result["points"] if p["ours"] and p["weights"]]
    if not ours:
        return
    fig, axes = plt.subplots(len(ours), 1, figsize=(9, 3.2 * len(ours)), squeeze=False)
    ts = result["scenario"]["time_scale"]
    for ax, p in zip(axes[:, 0], ours, strict=True):
        servers = sorted({s for sample in p["weights"] for s in sample["weights"]})
        for server in servers:
            pts = [
                (w["t"] / ts, w["weights"][server]) for w in p["weights"] if server in w["weights"]
            ]
            ax.plot([t for t, _ in pts], [w for _, w in pts], label=server)
        for event in p["events"]:
            ax.axvline(event["at_s"], color="grey", linestyle=":")
            kind = f"x{event['slowdown']:g} slower" if event["slowdown"] else "added"
            ax.annotate(f"{event['server']} {kind}", (event["at_s"], 1), fontsize=8)
        ax.set_title(f"{p['policy']} at {p['load']:.0%} load")
        ax.set_ylabel("Envoy weight")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    axes[-1, 0].set_xlabel("seconds into the point (simulated)")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def write_report(result: dict[str, Any], *, out_dir: Path, plots: bool = True) -> list[Path]:
    """``<name>.md`` (capacity and the table) and, with ``plots``, the PNGs; the paths."""
    name = result["scenario"]["name"]
    cap = result["capacity"]
    lines = [
        f"## {name}",
        "",
        result["scenario"].get("description", ""),
        "",
        f"Capacity: {cap['capacity_rps']:.2f} req/s ({cap.get('method', '')}).",
        "",
        points_table(result["points"]),
        "",
    ]
    written = [out_dir / f"{name}.md"]
    if plots:
        if len({p["load"] for p in result["points"]}) > 1:
            _latency_vs_load(result, out_dir / f"{name}-load.png")
            written.append(out_dir / f"{name}-load.png")
        _cdf(result, out_dir / f"{name}-ttft-cdf.png")
        written.append(out_dir / f"{name}-ttft-cdf.png")
        if result["scenario"]["events"]:
            _weights(result, out_dir / f"{name}-weights.png")
            written.append(out_dir / f"{name}-weights.png")
    (out_dir / f"{name}.md").write_text("\n".join(lines))
    return written
