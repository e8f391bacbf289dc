"""Per-server request counts, shares and TTFT over a window of finished requests (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from xds_lab.loadgen import percentile

__all__ = ["Served", "ServerWindow", "summarize_window"]


@dataclass(frozen=True, slots=True)
class Served:
    """One request as the demo remembers it: who answered, when it left and finished, its TTFT."""

    server: str
    started: float
    finished: float
    ok: bool
    ttft_s: float | None = None


@dataclass(frozen=True, slots=True)
class ServerWindow:
    """One server's traffic in a window; ``share`` is of the window's successful requests."""

    requests: int
    errors: int
    share: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None


def summarize_window(
    served: Iterable[Served],
    *,
    servers: Sequence[str],
    since: float,
    until: float,
    by: Literal["finished", "started"] = "finished",
) -> dict[str, ServerWindow]:
    """Every server in ``servers`` (even idle ones) over requests that ``by`` in ``[since, until)``.

    ``finished`` suits a live view: requests still in flight are unknown, and counting by start
    time would undercount the slow servers. ``started`` is when Envoy routed the request, so it
    measures what the weights did, but only once every request of the window has come back.
    """
    ok: dict[str, list[float | None]] = {name: [] for name in servers}
    errors = dict.fromkeys(servers, 0)
    for item in served:
        at = item.finished if by == "finished" else item.started
        if not since <= at < until or item.server not in ok:
            continue
        if item.ok:
            ok[item.server].append(item.ttft_s)
        else:
            errors[item.server] += 1
    total = sum(len(v) for v in ok.values())
    out = {}
    for name, ttfts in ok.items():
        known = [t for t in ttfts if t is not None]
        out[name] = ServerWindow(
            requests=len(ttfts),
            errors=errors[name],
            share=len(ttfts) / total if total else 0.0,
            ttft_p50_s=percentile(known, 50) if known else None,
            ttft_p99_s=percentile(known, 99) if known else None,
        )
    return out
