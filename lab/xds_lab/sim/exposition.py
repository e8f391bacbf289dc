"""The Prometheus text exposition format, written directly: families of samples and
histograms with escaped labels.

prometheus-client's collectors would cost a Python call per observed token; the simulator
keeps O(1) histograms (``stats.py``) and renders them here at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from xds_lab.sim.stats import Histogram

__all__ = ["Exposition", "labels"]


def labels(values: Mapping[str, str]) -> str:
    """``{k="v",...}`` with backslashes and quotes escaped."""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in values.items()
    )
    return "{" + inner + "}"


def _fmt(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


class Exposition:
    """One ``/metrics`` body, built family by family."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(
        self, name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]
    ) -> None:
        """One family; ``samples`` are ``(rendered_labels, value)`` under the family name."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        self.lines.extend(f"{name}{rendered} {_fmt(value)}" for rendered, value in samples)

    def histogram(
        self, name: str, help_text: str, base: Mapping[str, str], hist: Histogram
    ) -> None:
        """One histogram family: cumulative buckets, sum and count under ``base`` labels."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} histogram")
        for bound, count in hist.cumulative():
            le = labels({**base, "le": _fmt(bound)})
            self.lines.append(f"{name}_bucket{le} {_fmt(count)}")
        plain = labels(base)
        self.lines.append(f"{name}_sum{plain} {_fmt(hist.sum)}")
        self.lines.append(f"{name}_count{plain} {_fmt(hist.count)}")

    def text(self) -> str:
        """The body, newline-terminated."""
        return "\n".join(self.lines) + "\n"
