"""``python -m xds_lab.bench`` (``make bench``): run every benchmark, in a fixed order.

One benchmark alone, with its own flags: ``python -m xds_lab.bench.push_latency --help``.
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["BENCHMARKS", "main"]

BENCHMARKS = (
    "push_latency",
    "file_edit",
    "sim_throughput",
    "reconcile",
    "lb_quality",
    "fleet_streams",
    "classify_latency",
    "pick_cost",
    "mixed_pools",
    "limiter_overhead",
    "data_path_overhead",
    "overload",
    "token_budget",
    "flow_overhead",
    "demo_tour",
)
"""Module names in this package; each exposes ``main()``. Missing ones are skipped, so the runner
works while benchmarks are still being written."""


def main() -> None:
    """Run each present benchmark's ``main()`` with its defaults; a failure stops the run."""
    for name in BENCHMARKS:
        if importlib.util.find_spec(f"xds_lab.bench.{name}") is None:
            print(f"\n# xds_lab.bench.{name}: not present, skipped")
            continue
        print(f"\n# xds_lab.bench.{name}\n")
        importlib.import_module(f"xds_lab.bench.{name}").main()


if __name__ == "__main__":
    main()
