"""A scenario result as a Markdown table (``<name>.md``) and PNG plots (matplotlib, in the
runs folder git ignores: ``tables.runs_dir``).

Rows are ``aggregate.aggregate_points`` rows: one per (policy, load), the median over the
seeds that are results, min-max in brackets where several seeds ran, and how many requests the
P99 rests on. Lag-flagged seeds are counted, not shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xds_lab.bench.aggregate import aggregate_points, rests_on
from xds_lab.bench.capacity_judge import capacity_verdict
from xds_lab.bench.lag import LAG_P99_LIMIT_S
from xds_lab.bench.tables import runs_dir

__all__ = ["points_table", "write_report"]

_HEADER = (
    "policy",
    "load",
    "seeds (flagged)",
    "requests/seed (P99 rests on)",
    "offered req/s",
    "TTFT p50 ms",
    "TTFT p90 ms",
    "TTFT p99 ms",
    "P90 / ideal",
    "TPOT p99 ms",
    "E2E p99 s",
    "req/s",
    "goodput req/s",
    "prefix hit",
    "errors (timeouts)",
    "EDS pushes",
)


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.0f}"


def _ranged(p: Mapping[str, Any], key: str, fmt: str, scale: float = 1.0) -> str:
    value = p[key]
    if math.isnan(value):
        return "n/a"
    text = format(value * scale, fmt)
    low, high = p["range"].get(key, (value, value))
    if p["seeds"] > 1:
        text += f" [{format(low * scale, fmt)}-{format(high * scale, fmt)}]"
    return text


def _vs_ideal(p: Mapping[str, Any], ideal: Mapping[float, float]) -> str:
    base = ideal.get(p["load"], math.nan)
    if p.get("reference") or not base > 0 or math.isnan(p["ttft_p90_s"]):
        return "" if p.get("reference") else "n/a"
    return f"{p['ttft_p90_s'] / base:.1f}x"


def _row(p: Mapping[str, Any], ideal: Mapping[float, float]) -> list[str]:
    name = f"**{p['policy']}**" if p["ours"] else p["policy"]
    if p.get("reference"):
        name = f"_{p['policy']}_"
    head = [name, f"{p['load']:.0%}", f"{p['seeds']} ({p['flagged']})"]
    if p["seeds"] == 0:
        return [*head, "every seed lag-flagged: not a result", *[""] * (len(_HEADER) - 4)]
    return [
        *head,
        f"{p['requests']} ({rests_on(p['requests'], 99)})",
        f"{p['offered_rps']:.2f}",
        _ranged(p, "ttft_p50_s", ".0f", 1000),
        _ranged(p, "ttft_p90_s", ".0f", 1000),
        _ranged(p, "ttft_p99_s", ".0f", 1000),
        _vs_ideal(p, ideal),
        _ms(p["tpot_p99_s"]),
        "n/a" if math.isnan(p["e2e_p99_s"]) else f"{p['e2e_p99_s']:.1f}",
        f"{p['throughput_rps']:.2f}",
        _ranged(p, "goodput_rps", ".2f"),
        _ranged(p, "prefix_hit_ratio", ".2f"),
        f"{p['errors']:.0f} ({p['timeouts']:.0f})",
        f"{p['eds_pushes']:.0f}",
    ]


def points_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per (load, policy), grouped by load; ours in bold, the reference in italics."""
    ordered = sorted(rows, key=lambda p: p["load"])
    ideal = {p["load"]: p["ttft_p90_s"] for p in rows if p.get("reference") and p["seeds"]}
    lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * 2 + "---:|" * (len(_HEADER) - 2)]
    lines += ["| " + " | ".join(_row(p, ideal)) + " |" for p in ordered]
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
        style = "-" if pts[0]["ours"] else ":" if pts[0].get("reference") else "--"
        loads = [p["load"] * 100 for p in pts]
        for ax, key in ((axes[0], "ttft_p99_s"), (axes[1], "goodput_rps")):
            mid = [p[key] for p in pts]
            low = [m - p["range"].get(key, (m, m))[0] for p, m in zip(pts, mid, strict=True)]
            high = [p["range"].get(key, (m, m))[1] - m for p, m in zip(pts, mid, strict=True)]
            ax.errorbar(loads, mid, yerr=[low, high], fmt=style, marker="o", capsize=3, label=name)
    fewest = min(p["requests"] for p in result["points"])
    axes[0].set_yscale("log")
    axes[0].set_ylabel(
        f"TTFT p99 (s, log); median of seeds, bars min-max\n"
        f"each P99 rests on >= {rests_on(fewest, 99)} requests ({fewest}/point)"
    )
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
        label = f"{p['policy']} (n={len(xs)}, P99 on {rests_on(len(xs), 99)})"
        ax.step(xs, ys, "-" if p["ours"] else "--", where="post", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s, log)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{result['scenario']['name']}: TTFT CDF at {level:.0%} load (one seed)")
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


def _notes(result: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    rigor = result.get("rigor", {})
    notes = [
        f"Capacity: {result['capacity']['capacity_rps']:.2f} req/s "
        f"({result['capacity'].get('method', '')}); {capacity_verdict(rows)['text']}.",
        "",
        f"Run length: `{rigor.get('name', '?')}` ({rigor.get('seeds', 1)} seed(s) of >= "
        f"{rigor.get('min_requests', 0)} requests at the headline point). Cells with a range "
        "are the median [min-max] over seeds. A point whose simulator or load generator loop "
        f"lagged over {LAG_P99_LIMIT_S * 1000:.0f} ms at p99 is flagged and left out. "
        "`ideal` (italics) is the picker's rule with exact knowledge of every server's cache "
        "and queue, straight to the server (no Envoy): what stale and approximate signals "
        "cost the picker. It is greedy, one request at a time, so not a bound: a policy can "
        "beat it.",
    ]
    flags = [f"- {r['policy']} at {r['load']:.0%}: {f}" for r in rows for f in r.get("flags", ())]
    if flags:
        notes += ["", "Lag-flagged (not results):", *flags]
    notes += [f"- `{name}` skipped: {why}" for name, why in result.get("skipped", {}).items()]
    return notes


def write_report(result: dict[str, Any], *, out_dir: Path, plots: bool = True) -> list[Path]:
    """``<name>.md`` (capacity, its check, the table) and, with ``plots``, the PNGs under
    ``runs_dir(out_dir)``."""
    name = result["scenario"]["name"]
    rows = aggregate_points(result["points"])
    shown = {**result, "points": [r for r in rows if r["seeds"] > 0]}
    lines = [
        f"## {name}",
        "",
        result["scenario"].get("description", ""),
        "",
        *_notes(result, rows),
        "",
        points_table(rows),
        "",
    ]
    written = [out_dir / f"{name}.md"]
    runs = runs_dir(out_dir)
    if plots and shown["points"]:
        runs.mkdir(parents=True, exist_ok=True)
        if len({p["load"] for p in shown["points"]}) > 1:
            _latency_vs_load(shown, runs / f"{name}-load.png")
            written.append(runs / f"{name}-load.png")
        _cdf(shown, runs / f"{name}-ttft-cdf.png")
        written.append(runs / f"{name}-ttft-cdf.png")
        if result["scenario"]["events"]:
            _weights(shown, runs / f"{name}-weights.png")
            written.append(runs / f"{name}-weights.png")
    (out_dir / f"{name}.md").write_text("\n".join(lines))
    return written
