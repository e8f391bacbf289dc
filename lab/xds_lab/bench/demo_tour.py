"""The demo's tour, judged: ``xds-control demo --duration SECONDS`` played ``--runs`` times.

Six simulated vLLM servers (two each on H100, A100 and L4 profiles), the control plane with the
weight engine on, a real Envoy and steady streamed chat traffic; midway one H100 is slowed down
four times. Each run's verdict says whether that server's weight and traffic share fell during
the fault and its weight came back after it (``xds_lab.demo.verdict``), and how long after the
fault Envoy first held a lower weight for it (README: within about 10 s). The suite plays the
tour once, short, for what a user sees (the phases, the fault, the verdict line, nothing left
running); whether the shares move is judged here, over phases long enough to measure a share
(120 s: about 170 requests per half phase).
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Sequence

from rich.console import Console

from xds_lab.bench import entry
from xds_lab.demo.tour import run_tour

__all__ = ["FALL_WITHIN_S", "main"]

FALL_WITHIN_S = 10.0
"""What the README says of the first fall: within about 10 s of the fault."""


def main(argv: Sequence[str] | None = None) -> None:
    """Play the tour ``--runs`` times; print each verdict, when the weight first fell and how
    long the run took."""
    parser = entry.parser("demo_tour", __doc__, seconds=120.0, runs=3)
    run = entry.start(parser, argv)
    args = run.args
    rows = ["| run | verdict | first fall (s) | seconds |", "|---:|---|---:|---:|"]
    verdicts: list[dict[str, object]] = []
    passed = within = 0
    for index in range(1, args.runs + 1):
        started = time.monotonic()
        # The phase tables go to a buffer: the report carries the verdicts.
        console = Console(file=io.StringIO(), width=160)
        verdict = asyncio.run(run_tour(duration=args.seconds, console=console))
        assert verdict is not None  # a duration always ends with one
        took = time.monotonic() - started
        passed += verdict.ok
        fell = verdict.fell_after_s
        within += fell is not None and fell <= FALL_WITHIN_S
        verdicts.append(
            {
                "ok": verdict.ok,
                "message": verdict.message,
                "fell_after_s": None if fell is None else round(fell, 1),
                "seconds": round(took, 1),
            }
        )
        rows.append(
            f"| {index} | {verdict.message} | {'-' if fell is None else f'{fell:.1f}'} "
            f"| {took:.0f} |"
        )
        print(f"  run {index}: {verdict.message}", flush=True)
    run.finish(
        title="The demo's tour: measured",
        what=f"{args.runs} runs of {args.seconds:g} s; {passed} of {args.runs} OK; the weight "
        f"first fell within {FALL_WITHIN_S:g} s of the fault in {within} of {args.runs}.",
        body=["\n".join(rows)],
        summary={"runs": verdicts, "ok": passed},
    )


if __name__ == "__main__":
    main()
