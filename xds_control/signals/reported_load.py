"""The load each server reported with its last response, kept as a signal source.

The picker reads a pool's responses (``picker/exchange.py``); for a pool with
``picker.per_response_load`` each carries its server's ``endpoint-load-metrics`` header
(``signals/load_report.py``), and the picker records it here with the time it came. Two
readers: the picker, whose next pick reads a server's queue from its last report when that is
fresher than the engine's reading; and the engine, which asks this like any other
``SignalSource`` (``fetch``) and merges its ``WAITING`` and ``KV_USAGE`` readings with the
others', the freshest winning (``merge.py``). A report as old as the pool's ``stale_after_s``
ages out in the engine as any reading does; a server that sends none is simply absent.

Memory is bounded: the newest report per address, at most ``max_addresses`` addresses, the
least recently reporting forgotten first. No IO and no clock: the caller gives each report's
time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping
from typing import NamedTuple

from xds_control.signals.load_report import LoadReport
from xds_control.signals.sample import Sample, Signal
from xds_control.signals.source import Target

__all__ = ["SOURCE", "Reported", "ReportedLoad"]

SOURCE = "response"
"""The ``Reading.source`` of every reading from a response's load report."""


class Reported(NamedTuple):
    """A server's last report and when it came (Unix seconds)."""

    report: LoadReport
    at: float


class ReportedLoad:
    """The newest load report of each server, by address; a ``SignalSource``."""

    def __init__(self, *, max_addresses: int = 10_000) -> None:
        self._max = max_addresses
        self._last: OrderedDict[str, Reported] = OrderedDict()

    def record(self, address: str, report: LoadReport, *, at: float) -> None:
        """``address`` answered a response carrying ``report`` at ``at``; an older report
        than the one kept (responses of one server may be read out of order) is ignored."""
        kept = self._last.get(address)
        if kept is not None and kept.at > at:
            return
        self._last[address] = Reported(report, at)
        self._last.move_to_end(address)
        while len(self._last) > self._max:
            self._last.popitem(last=False)

    def last(self, address: str) -> Reported | None:
        """``address``'s newest report, or ``None``: it sent none."""
        return self._last.get(address)

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        """Samples of the ``targets`` that reported, keyed by address; never raises."""
        out: dict[str, Sample] = {}
        for target in targets:
            kept = self._last.get(target.address)
            if kept is None:
                continue
            values = [
                (signal, value)
                for signal, value in (
                    (Signal.WAITING, kept.report.waiting),
                    (Signal.KV_USAGE, kept.report.kv_usage),
                )
                if value is not None
            ]
            out[target.address] = Sample.build(
                address=target.address, values=values, observed_at=kept.at, source=SOURCE
            )
        return out
