"""What every benchmark's command line shares, ``python -m xds_lab.bench.NAME [flags]``.

- ``parser``: the parser, named after the benchmark, its module docstring as the help, with
  the flags several benchmarks take: one name, one meaning and one help each, the default the
  benchmark's own. A benchmark adds only its own flags.
- ``start``: parse, set the log level, and note the command as typed and the machine at the
  start (its load average says whether other work shared the cores).
- ``Run.finish``: the report tail. The title, the command, the benchmark's tables and the
  machine are printed; with ``--out DIR`` they are also written as ``DIR/NAME.md``, the flags,
  the machine and the figures as ``DIR/NAME.json``, and the plot, if any, as
  ``DIR/runs/NAME.png`` (``tables.runs_dir``: git ignores it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from xds_control.log import configure_logging
from xds_lab.bench.tables import machine_info, runs_dir, write_report
from xds_lab.harness.envoy import find_envoy

__all__ = ["DOCS_BENCH", "Run", "parser", "start"]

DOCS_BENCH = Path("docs/bench")
"""Where the committed reports live: the default ``--out`` of a benchmark docs/ quotes."""

_SHARED: dict[str, tuple[type, str]] = {
    "seconds": (float, "seconds of load in each measured step"),
    "rounds": (int, "rounds of every arm, the arms alternating (drift falls on all)"),
    "rate": (float, "requests/s offered to each arm"),
    "capacity": (float, "requests/s the simulated fleet serves; the offered load is set from it"),
    "load": (float, "offered load, a fraction of --capacity"),
    "runs": (int, "times the whole measurement runs"),
}


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every flag's default."""


def parser(
    name: str,
    doc: str | None,
    *,
    out: Path | None = None,
    report: bool = True,
    seconds: float | None = None,
    rounds: int | None = None,
    rate: float | None = None,
    capacity: float | None = None,
    load: float | None = None,
    runs: int | None = None,
) -> argparse.ArgumentParser:
    """The parser of benchmark ``name`` (its module in this package), with ``--out`` (default
    ``out``: none prints the report only) unless it writes no ``report``, and each shared flag
    given a default here."""
    made = argparse.ArgumentParser(
        prog=f"python -m xds_lab.bench.{name}",
        description=doc,
        formatter_class=_Help,
    )
    if report:
        made.add_argument(
            "--out",
            type=Path,
            default=out,
            metavar="DIR",
            help=f"write {name}.md, {name}.json here (a plot under runs/); none: print only",
        )
    given = {
        "seconds": seconds,
        "rounds": rounds,
        "rate": rate,
        "capacity": capacity,
        "load": load,
        "runs": runs,
    }
    for flag, default in given.items():
        if default is not None:
            kind, help_text = _SHARED[flag]
            made.add_argument(f"--{flag}", type=kind, default=default, help=help_text)
    return made


@dataclass(frozen=True)
class Run:
    """One run of a benchmark: its flags, the command as typed, the machine at the start."""

    name: str
    args: argparse.Namespace
    command: str
    machine: dict[str, str]

    def finish(
        self,
        *,
        title: str,
        body: Sequence[str],
        what: str = "",
        summary: Mapping[str, object] | None = None,
        plot: Callable[[Path], None] | None = None,
        file: str | None = None,
    ) -> None:
        """Print the report (``title``, the command and ``what`` it ran, ``body``, the
        machine); under ``--out`` also write it, the JSON ``summary`` beside the flags and the
        machine, and ``plot(path)`` in the runs folder; ``file`` names the files (default: the
        benchmark's)."""
        lines = [
            f"# {title}",
            "",
            f"`{self.command}`" + (f": {what}" if what else ""),
            "",
            *body,
            "",
            *(f"- {key}: {value}" for key, value in self.machine.items()),
        ]
        out: Path | None = self.args.out
        if out is None:
            print("\n".join(lines))
            return
        stem = file or self.name
        report = {"args": {k: str(v) for k, v in vars(self.args).items()}, "machine": self.machine}
        write_report(out=out, name=stem, lines=lines, summary={**report, **(summary or {})})
        if plot is not None:
            plot(runs_dir(out) / f"{stem}.png")


def start(
    made: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    *,
    log_level: str = "warning",
    envoy: bool = True,
) -> Run:
    """Parse ``argv`` (``None``: the process's), log at ``log_level`` (a log line per event
    would be timed too) and note the machine, with the Envoy version if the benchmark runs
    ``envoy``."""
    args = made.parse_args(argv)
    configure_logging(level=log_level)
    given = sys.argv[1:] if argv is None else list(argv)
    return Run(
        name=made.prog.rpartition(".")[2],
        args=args,
        command=" ".join([made.prog, *given]),
        machine=machine_info(envoy_bin=find_envoy() if envoy else None),
    )
