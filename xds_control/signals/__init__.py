"""Signals: per-endpoint samples from Prometheus, from direct /metrics scrapes and from the
data path (Envoy's access log) and the servers' own per-response load reports."""

from xds_control.signals.access_log import (
    AccessLogServicer,
    DataPath,
    DataPathLatency,
    DataPathSource,
)
from xds_control.signals.data_path import DataPathWindow
from xds_control.signals.load_report import LoadReport, parse_load_report
from xds_control.signals.merge import merge_samples
from xds_control.signals.observation import Observation, from_entry
from xds_control.signals.prometheus import PrometheusSource
from xds_control.signals.reported_load import ReportedLoad
from xds_control.signals.sample import RATIO_SIGNALS, Reading, Sample, Signal, make_reading
from xds_control.signals.scrape import ScrapeSource
from xds_control.signals.source import SignalSource, Target, targets_for_pool
from xds_control.signals.templates import render_queries

__all__ = [
    "RATIO_SIGNALS",
    "AccessLogServicer",
    "DataPath",
    "DataPathLatency",
    "DataPathSource",
    "DataPathWindow",
    "LoadReport",
    "Observation",
    "PrometheusSource",
    "Reading",
    "ReportedLoad",
    "Sample",
    "ScrapeSource",
    "Signal",
    "SignalSource",
    "Target",
    "from_entry",
    "make_reading",
    "merge_samples",
    "parse_load_report",
    "render_queries",
    "targets_for_pool",
]
