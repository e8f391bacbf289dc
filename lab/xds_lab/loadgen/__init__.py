"""A seeded, open-loop load generator for OpenAI-compatible servers (simulated or real).

Entry points: ``LoadSpec`` (what to offer), ``build_requests`` (the seeded request sequence),
``run_load`` (send it on schedule, record what came back), ``schedule`` (the timing alone, for
a sender that never ends) and ``summarize`` (percentiles, goodput). ``xds-control bench load``
wires them to the command line.
"""

from __future__ import annotations

from xds_lab.loadgen.runner import run_load, schedule
from xds_lab.loadgen.stats import Slo, percentile, summarize
from xds_lab.loadgen.workloads import LoadSpec, RequestSpec, build_requests, fingerprint

__all__ = [
    "LoadSpec",
    "RequestSpec",
    "Slo",
    "build_requests",
    "fingerprint",
    "percentile",
    "run_load",
    "schedule",
    "summarize",
]
