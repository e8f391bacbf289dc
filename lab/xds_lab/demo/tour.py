"""The tour: a mixed fleet behind a real Envoy, weights from the engine, a fault midway.

Six simulated vLLM servers on three GPU classes sit behind Envoy; ``xds-control serve`` scrapes
their ``/metrics`` and sets the weights; steady chat traffic flows through Envoy. Warm-up lets the
weights settle near capacity (H100 > A100 > L4), then one H100 is slowed down four times (its
weight falls, traffic moves away), then the fault clears and it wins its weight back. A terminal
gets a live table; anything else gets a table per phase. With a duration the phases run once and
``judge`` gives the verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from rich.console import Console, RenderableType
from rich.live import Live

from xds_lab.demo.phases import Phase, plan
from xds_lab.demo.stack import FLEET, DemoStack, ServerState, demo_config, demo_stack, observe
from xds_lab.demo.traffic import SteadyTraffic
from xds_lab.demo.verdict import PhaseOutcome, Verdict, first_below, judge
from xds_lab.demo.view import render
from xds_lab.demo.window import summarize_window
from xds_lab.harness.errors import HarnessError
from xds_lab.sim.faults import FaultUpdate

__all__ = ["FAULTED", "RATE", "SLOWDOWN", "run_tour"]

FAULTED = "h100-0"
"""A fast server: slowing it moves the most traffic, so the fault is plain to see."""
SLOWDOWN = 4.0
RATE = 8.0
"""Requests per second: enough to measure shares every few seconds, light enough for two cores."""
_POLL_S = 0.5
_LIVE_WINDOW_S = 10.0
_PRINT_WIDTH = 132
"""Wide enough for every column when the output is a file or a pipe (rich assumes 80)."""


@dataclass(frozen=True, slots=True)
class _PhaseRun:
    start: float
    end: float
    looks: list[tuple[float, int]]
    """The faulted server's Envoy weight at every look, with the look's time, in order."""


@dataclass(slots=True)
class _Tour:
    stack: DemoStack
    traffic: SteadyTraffic
    console: Console
    live: Live | None
    started: float
    events: list[str]
    states: dict[str, ServerState]
    faulty: bool = False

    def event(self, text: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:6.1f}s  {text}")
        del self.events[:-4]  # the last few are enough to follow the story

    async def observe(self) -> None:
        # A slow admin answer costs one refresh, never the tour: keep the last view.
        with contextlib.suppress(HarnessError, aiohttp.ClientError, OSError, TimeoutError):
            self.states = await observe(self.stack)

    async def run_phase(self, phase: Phase, *, label: str) -> _PhaseRun:
        """Play ``phase``, refreshing the view; return the faulted server's weights in it."""
        if phase.fault and not self.faulty:
            self.stack.backends.servers[FAULTED].faults.apply(FaultUpdate(slowdown=SLOWDOWN))
            self.event(f"fault: slowdown x{SLOWDOWN:g} on {FAULTED}")
        elif self.faulty and not phase.fault:
            self.stack.backends.servers[FAULTED].faults.clear()
            self.event(f"fault cleared on {FAULTED}")
        self.faulty = phase.fault
        start = time.monotonic()
        end = start + phase.seconds
        looks: list[tuple[float, int]] = []
        while (now := time.monotonic()) < end:
            await self.observe()
            if (weight := self.states[FAULTED].envoy_weight if self.states else None) is not None:
                looks.append((time.monotonic(), weight))
            if self.live is not None:
                self.live.update(
                    self.view(
                        title=f"{label} · {now - start:4.0f}/{phase.seconds:.0f} s",
                        since=now - _LIVE_WINDOW_S,
                        until=now,
                        window_label=f"traffic: requests finished in the last {_LIVE_WINDOW_S:g} s",
                    )
                )
            await asyncio.sleep(min(_POLL_S, max(0.0, end - time.monotonic())))
        await self.observe()
        settled = start + phase.seconds / 2
        if self.live is None:
            table = self.view(
                title=f"{label} ({phase.seconds:.0f} s)",
                since=settled,
                until=end,
                window_label=f"traffic: requests finished in the phase's last "
                f"{end - settled:.0f} s",
            )
            self.console.print(table)
        last = self.states[FAULTED].envoy_weight if self.states else None
        if last is not None:
            looks.append((time.monotonic(), last))
        return _PhaseRun(start=start, end=end, looks=looks)

    def outcome(self, run: _PhaseRun) -> PhaseOutcome:
        """The faulted server's weights in ``run`` and its share of what Envoy routed in the
        phase's settled second half (call once those requests have come back)."""
        routed = summarize_window(
            self.traffic.served,
            servers=list(self.stack.backends.addresses),
            since=(run.start + run.end) / 2,
            until=run.end,
            by="started",
        )
        weights = [weight for _, weight in run.looks]
        return PhaseOutcome(
            weight_end=weights[-1] if weights else 0,
            weight_min=min(weights, default=0),
            share=routed[FAULTED].share,
            requests=sum(w.requests for w in routed.values()),
        )

    def view(self, *, title: str, since: float, until: float, window_label: str) -> RenderableType:
        window = summarize_window(
            self.traffic.served,
            servers=list(self.stack.backends.addresses),
            since=since,
            until=until,
        )
        return render(
            title=title,
            events=self.events,
            profiles=dict(FLEET),
            states=self.states,
            window=window,
            window_label=window_label,
            faulted=FAULTED,
        )


async def run_tour(*, duration: float | None, console: Console) -> Verdict | None:
    """Play the phases once in about ``duration`` seconds and judge them, or, with ``None``,
    loop until cancelled (Ctrl-C). Everything started is stopped on the way out."""
    with tempfile.TemporaryDirectory(prefix="xds-control-demo-") as tmp:
        stack = demo_stack(Path(tmp))
        traffic = SteadyTraffic(url=stack.url, rate=RATE)
        try:
            await stack.start(demo_config(stack))
            _introduce(stack, console)
            traffic.start()
            live = Live(console=console, refresh_per_second=2) if console.is_terminal else None
            # rich assumes 80 columns without a terminal; print can narrow a console, not widen it.
            out = console if live else Console(file=console.file, width=_PRINT_WIDTH)
            tour = _Tour(stack, traffic, out, live, time.monotonic(), [], {})
            with live if live is not None else contextlib.nullcontext():
                cycle = 0
                while True:
                    cycle += 1
                    phases = plan(duration)
                    runs = []
                    for index, phase in enumerate(phases):
                        label = f"cycle {cycle} · phase {index + 1}/{len(phases)}: {phase.name}"
                        runs.append(await tour.run_phase(phase, label=label))
                    if duration is not None:
                        # Judged after recovery: every request routed during the fault is back.
                        before, during, after = (tour.outcome(run) for run in runs)
                        fell_after_s = first_below(
                            runs[1].looks, level=before.weight_end, since=runs[1].start
                        )
                        return judge(
                            server=FAULTED,
                            before=before,
                            during=during,
                            after=after,
                            fell_after_s=fell_after_s,
                        )
        finally:
            await traffic.stop()
            await stack.close()


def _introduce(stack: DemoStack, console: Console) -> None:
    servers = ", ".join(f"{n} ({p})" for n, p in FLEET)
    console.print(f"fleet: {servers}")
    console.print(
        f"control plane: weights from direct /metrics scrapes, reconcile every 1 s; "
        f"admin {stack.control_plane.admin_url}/v1/weights?explain=1"
    )
    console.print(f"envoy: listener {stack.url}, admin {stack.envoy.admin_url}/clusters")
    console.print(
        f"traffic: {RATE:g} streamed chat requests/s through Envoy (prompt ~200, output ~60 "
        f"tokens); fault midway: slowdown x{SLOWDOWN:g} on {FAULTED}\n"
    )
