"""Signals: per-endpoint samples from Prometheus and from direct /metrics scrapes."""

from xds_control.signals.merge import merge_samples
from xds_control.signals.prometheus import PrometheusSource
from xds_control.signals.sample import RATIO_SIGNALS, Reading, Sample, Signal, make_reading
from xds_control.signals.scrape import ScrapeSource
from xds_control.signals.source import SignalSource, Target, targets_for_pool
from xds_control.signals.templates import render_queries

__all__ = [
    "RATIO_SIGNALS",
    "PrometheusSource",
    "Reading",
    "Sample",
    "ScrapeSource",
    "Signal",
    "SignalSource",
    "Target",
    "make_reading",
    "merge_samples",
    "render_queries",
    "targets_for_pool",
]
