"""The load-balancing benchmark suite: scenarios, policies, runs and reports.

It sits around the pipeline like ``harness``, ``sim`` and ``loadgen`` (the core never imports
it). ``xds-control bench run --scenario FILE`` and ``python -m xds_lab.bench.lb_quality`` call
``run_scenario_file``; ``docs/benchmarks.md`` explains what it measures.
"""

from __future__ import annotations

from xds_lab.bench.policies import POLICIES, Policy
from xds_lab.bench.runner import run_scenario, run_scenario_file
from xds_lab.bench.scenario import Scenario, load_scenario

__all__ = [
    "POLICIES",
    "Policy",
    "Scenario",
    "load_scenario",
    "run_scenario",
    "run_scenario_file",
]
