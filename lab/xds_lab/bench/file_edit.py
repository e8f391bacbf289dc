"""Endpoints-file edit -> Envoy runs the new weight: how long an operator's edit takes.

``xds-control serve`` runs as a child process with ``signals.reconcile_period_s: 30``, so only
the file watch can carry an edit in time; one real Envoy. Each sample: one endpoint's weight
changed in an endpoints file of N endpoints, written as an editor saves (a new file renamed
over the old one), then Envoy's ``/clusters`` read every 10 ms until that host runs the new
weight. The time is from the rename to the first read that shows it, so it includes the quiet
window (``watch.debounce_ms``), reading and validating the file, building the snapshot, the
push, Envoy applying it, and up to one 10 ms polling step.

    python -m xds_lab.bench.file_edit --endpoints 100,1000 --edits 20
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from xds_lab.bench import entry
from xds_lab.bench.tables import markdown_table
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import EnvoyProcess
from xds_lab.harness.pool_config import POOL, one_pool_config
from xds_lab.harness.ports import free_port
from xds_lab.loadgen import percentile

__all__ = ["EditResult", "main", "measure_file_edits"]

POLL_S = 0.01


@dataclass(frozen=True)
class EditResult:
    """One cell: seconds from each edit to Envoy running it."""

    endpoints: int
    latency_s: list[float]


def _addresses(count: int) -> list[str]:
    # Nothing listens there: Envoy only needs the hosts, no traffic goes to them.
    return [f"127.0.{1 + i // 250}.{1 + i % 250}:9000" for i in range(count)]


def _render(weights: dict[str, int]) -> str:
    data = {"endpoints": [{"address": a, "weight": w} for a, w in weights.items()]}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False)


def _write(path: Path, text: str) -> None:
    scratch = path.with_name(f".{path.name}.swp")
    scratch.write_text(text)
    os.replace(scratch, path)


async def _updates(envoy: EnvoyProcess) -> int:
    text = await envoy.admin_get(f"/stats?filter=^cluster\\.{POOL}\\.update_success$")
    return int(text.rpartition(":")[2] or 0)


async def _seen(envoy: EnvoyProcess, address: str, weight: int, *, timeout: float) -> float:
    """``time.monotonic()`` of the first read showing ``address`` at ``weight``.

    ``/clusters`` of 1,000 hosts is ~700 KB that Envoy's main thread (the one applying xDS)
    renders in 7-18 ms: read every 10 ms it would slow what it measures. So the cheap counter
    of accepted EDS updates is read every 10 ms, and ``/clusters`` once it moves."""
    line = f"{POOL}::{address}::weight::{weight}\n"
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        updates = await _updates(envoy)
        if updates != seen:
            now = time.monotonic()
            if line in await envoy.admin_get("/clusters"):
                return now
            seen = updates
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"Envoy did not run weight {weight} for {address} in {timeout}s")


async def measure_file_edits(
    *, endpoints: int, edits: int, workdir: Path, seed: int = 1, debounce_ms: int | None = None
) -> EditResult:
    """Start a control plane and an Envoy over ``endpoints``, time ``edits`` edits."""
    rng = random.Random(seed)
    weights = dict.fromkeys(_addresses(endpoints), 10)
    eps = workdir / "eps.yaml"
    control = _control_plane(workdir, first=_render(weights), debounce_ms=debounce_ms)
    envoy = EnvoyProcess(workdir=workdir, xds_port=control.xds_port)
    latencies = []
    try:
        await control.start()
        await envoy.start()
        await envoy.wait_live()
        first = next(iter(weights))
        await _seen(envoy, first, 10, timeout=30)
        gc.disable()  # this process's own pauses (40-90 ms at 1,000) are not what is measured
        for _ in range(edits):
            await asyncio.sleep(rng.uniform(0.1, 0.5))  # random gaps between edits
            address = rng.choice(list(weights))
            weights[address] = rng.choice([w for w in range(1, 101) if w != weights[address]])
            text = _render(weights)  # not timed: the editor's work
            gc.collect()  # not timed either
            start = time.monotonic()
            _write(eps, text)
            latencies.append(await _seen(envoy, address, weights[address], timeout=10) - start)
    finally:
        gc.enable()
        await envoy.stop()
        await control.stop()
    return EditResult(endpoints=endpoints, latency_s=latencies)


def _control_plane(workdir: Path, *, first: str, debounce_ms: int | None) -> ControlPlaneProcess:
    """A control plane (not started) serving one pool from ``workdir/eps.yaml`` (``first``),
    with ``watch.debounce_ms`` if given, else the default."""
    workdir.mkdir(parents=True, exist_ok=True)
    _write(workdir / "eps.yaml", first)
    config = one_pool_config(endpoints=[], listener_port=free_port())
    config["pools"] = [{"name": POOL, "endpoints_file": "eps.yaml"}]
    config["signals"] = {"reconcile_period_s": 30}
    if debounce_ms is not None:
        config["watch"] = {"debounce_ms": debounce_ms}
    control = ControlPlaneProcess(
        config_path=workdir / "config.yaml", workdir=workdir, log_level="warning"
    )
    control.write_config(config)
    return control


def results_table(results: Sequence[EditResult]) -> str:
    """Edit -> Envoy runs it, per size, in ms."""
    rows = [
        [
            r.endpoints,
            len(r.latency_s),
            *(f"{percentile(r.latency_s, q) * 1000:.0f}" for q in (50, 90, 99)),
            f"{max(r.latency_s) * 1000:.0f}",
        ]
        for r in results
    ]
    header = ["Endpoints", "Edits", "p50 ms", "p90 ms", "p99 ms", "max ms"]
    return markdown_table(header=header, rows=rows)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    """Run each size, print the table and the machine."""
    parser = entry.parser("file_edit", __doc__)
    parser.add_argument("--endpoints", type=_ints, default=[100, 1000], help="e.g. 100,1000")
    parser.add_argument("--edits", type=int, default=20, help="edits per size")
    parser.add_argument(
        "--debounce-ms", type=int, default=None, help="watch.debounce_ms (default: the default)"
    )
    run = entry.start(parser, argv)
    args = run.args
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-file-edit-") as tmp:
        for count in args.endpoints:
            workdir = Path(tmp) / str(count)
            results.append(
                asyncio.run(
                    measure_file_edits(
                        endpoints=count,
                        edits=args.edits,
                        workdir=workdir,
                        debounce_ms=args.debounce_ms,
                    )
                )
            )
            print(f"  {count} endpoints: done", flush=True)
    run.finish(
        title="Endpoints-file edit -> Envoy: measured",
        what=f"{args.edits} edits per size.",
        body=[results_table(results)],
        summary={"sizes": [asdict(r) for r in results]},
    )


if __name__ == "__main__":
    main()
