"""The tour's table: per server, Envoy's weight, the engine's factors and signals, and traffic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from xds_lab.demo.stack import ServerState
from xds_lab.demo.window import ServerWindow

__all__ = ["render"]

_BAR = 10


def _bar(weight: int | None) -> str:
    if weight is None:
        return "-"
    filled = round(_BAR * weight / 100)
    return f"{weight:>3} {'█' * filled}{'·' * (_BAR - filled)}"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def render(
    *,
    title: str,
    events: Sequence[str],
    profiles: Mapping[str, str],
    states: Mapping[str, ServerState],
    window: Mapping[str, ServerWindow],
    window_label: str,
    faulted: str | None,
) -> RenderableType:
    """A header (phase and events) over one row per server; the faulted server in red."""
    table = Table(title=title, title_justify="left", caption=window_label, caption_justify="left")
    table.add_column("server")
    table.add_column("profile")
    table.add_column("Envoy weight")
    for factor in ("capacity", "queue", "kv"):
        table.add_column(factor, justify="right")
    for signal in ("waiting", "kv used", "step ms", "req", "share", "TTFT p50", "p99 ms"):
        table.add_column(signal, justify="right")
    for name, profile in profiles.items():
        state = states.get(name, ServerState(envoy_weight=None, envoy_health=None))
        traffic = window.get(name)
        health = "" if state.envoy_health in (None, "HEALTHY") else f" {state.envoy_health}"
        table.add_row(
            name,
            profile,
            _bar(state.envoy_weight) + health,
            _num(state.factors.get("capacity"), ".2f"),
            _num(state.factors.get("queue"), ".2f"),
            _num(state.factors.get("kv"), ".2f"),
            _num(state.inputs.get("waiting"), ".0f"),
            _num(state.inputs.get("kv_usage"), ".1%"),
            _ms(state.inputs.get("decode_step_s")),
            str(traffic.requests) if traffic else "-",
            f"{traffic.share:.0%}" if traffic else "-",
            _ms(traffic.ttft_p50_s) if traffic else "-",
            _ms(traffic.ttft_p99_s) if traffic else "-",
            style="red" if name == faulted else None,
        )
    header = Text("\n".join(events) if events else "no events yet", style="bold")
    return Group(header, table)
