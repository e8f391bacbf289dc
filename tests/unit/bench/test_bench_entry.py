"""The benchmarks' shared command line: one meaning per shared flag, and one report tail that
prints, or with ``--out`` also writes, what a run measured."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from xds_lab.bench import entry


def _parser() -> argparse.ArgumentParser:
    parser = entry.parser("demo_bench", "A benchmark.", seconds=2.0, runs=3)
    parser.add_argument("--own", type=int, default=7)
    return parser


def test_a_benchmark_takes_the_shared_flags_it_names_and_its_own() -> None:
    run = entry.start(_parser(), ["--seconds", "0.5"], envoy=False)
    assert (run.args.seconds, run.args.runs, run.args.own, run.args.out) == (0.5, 3, 7, None)
    assert run.command == "python -m xds_lab.bench.demo_bench --seconds 0.5"
    assert run.name == "demo_bench"
    with pytest.raises(SystemExit):  # not named by this benchmark: not taken
        _parser().parse_args(["--rate", "5"])


def test_without_out_the_report_is_printed_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = entry.start(_parser(), [], envoy=False)
    run.finish(title="Demo: measured", what="one step.", body=["| a |"], summary={"x": 1})
    printed = capsys.readouterr().out.splitlines()
    assert printed[:5] == [
        "# Demo: measured",
        "",
        "`python -m xds_lab.bench.demo_bench`: one step.",
        "",
        "| a |",
    ]
    assert printed[-1].startswith("- load average at start")
    assert list(tmp_path.iterdir()) == []


def test_with_out_the_report_its_figures_and_its_plot_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = entry.start(_parser(), ["--out", str(tmp_path / "out")], envoy=False)
    plotted: list[Path] = []
    run.finish(title="Demo", body=["| a |"], summary={"x": 1}, plot=plotted.append)
    out = tmp_path / "out"
    assert (out / "demo_bench.md").read_text() == capsys.readouterr().out
    saved = json.loads((out / "demo_bench.json").read_text())
    assert saved["x"] == 1
    assert saved["args"]["runs"] == "3"
    assert saved["machine"]["envoy"] == "n/a"
    assert plotted == [out / "runs" / "demo_bench.png"]  # a run's plot: under runs/, git ignores it
