"""The issue's aims, checked against measured results (a verdict for the report, not a test).

Each aim reads the aggregated rows (median over the seeds that are results); the ``ideal``
reference is neither "ours" nor "Envoy's best".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from xds_lab.bench.aggregate import aggregate_points

__all__ = ["aim_lines"]


def _rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = aggregate_points(result["points"])
    return [r for r in rows if r["seeds"] > 0 and not r.get("reference")]


def _at(result: Mapping[str, Any], load: float) -> list[dict[str, Any]]:
    return [p for p in _rows(result) if abs(p["load"] - load) < 1e-9]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and math.isfinite(a) and math.isfinite(b) else math.nan


def _mixed(result: Mapping[str, Any]) -> str:
    pts = {p["policy"]: p for p in _at(result, 0.8)}
    ours = [p for p in pts.values() if p["ours"]]
    if "least_request" not in pts or not ours:
        return "mixed @80%: not measured"
    best = min(ours, key=lambda p: p["ttft_p99_s"])
    base = pts["least_request"]["ttft_p99_s"]
    ratio = _ratio(base, best["ttft_p99_s"])
    verdict = "MET" if ratio >= 5 else "MISSED"
    return (
        f"mixed @80%: best of ours `{best['policy']}` P99 TTFT {best['ttft_p99_s']:.2f} s vs "
        f"least_request {base:.2f} s: {ratio:.1f}x lower (aim >= 5x): **{verdict}**"
    )


def _prefix(result: Mapping[str, Any]) -> str:
    pts = {p["policy"]: p for p in _at(result, 0.8)}
    if "round_robin" not in pts or "least_request" not in pts:
        return "prefix-heavy @80%: not measured"
    rr_hit = pts["round_robin"]["prefix_hit_ratio"]
    lr_p99 = pts["least_request"]["ttft_p99_s"]
    parts = []
    met = False
    for p in (p for p in pts.values() if p["ours"]):
        hit_x = _ratio(p["prefix_hit_ratio"], rr_hit)
        ok = hit_x >= 3 and p["ttft_p99_s"] <= lr_p99
        met = met or ok
        parts.append(
            f"`{p['policy']}` hit {p['prefix_hit_ratio']:.2f} ({hit_x:.1f}x round_robin's "
            f"{rr_hit:.2f}), P99 TTFT {p['ttft_p99_s']:.2f} s vs least_request {lr_p99:.2f} s"
        )
    verdict = "MET" if met else "MISSED"
    return "prefix-heavy @80%: " + "; ".join(parts) + f": **{verdict}**"


def _homogeneous(result: Mapping[str, Any]) -> str:
    parts = []
    met = True
    for load in sorted({p["load"] for p in _rows(result)}):
        pts = _at(result, load)
        envoy = [p for p in pts if not p["ours"]]
        ours = [p for p in pts if p["ours"]]
        if not envoy or not ours:
            continue
        best_envoy = min(envoy, key=lambda p: p["ttft_p99_s"])
        best_ours = min(ours, key=lambda p: p["ttft_p99_s"])
        ratio = _ratio(best_ours["ttft_p99_s"], best_envoy["ttft_p99_s"])
        met = met and ratio <= 1.1
        parts.append(
            f"{load:.0%}: ours {best_ours['ttft_p99_s']:.2f} s (`{best_ours['policy']}`) vs "
            f"Envoy's best {best_envoy['ttft_p99_s']:.2f} s (`{best_envoy['policy']}`), "
            f"{ratio:.2f}x"
        )
    verdict = "MET" if met and parts else "MISSED"
    return "homogeneous (P99 TTFT within 10%): " + "; ".join(parts) + f": **{verdict}**"


def aim_lines(results: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One Markdown bullet per aim whose scenario (mixed, prefix-heavy, homogeneous) ran."""
    checks = (("mixed", _mixed), ("prefix-heavy", _prefix), ("homogeneous", _homogeneous))
    return [f"- {check(results[name])}" for name, check in checks if name in results]
