"""The tour's verdict and the aggregation it rests on (pure)."""

from __future__ import annotations

import pytest

from xds_lab.demo.phases import plan
from xds_lab.demo.verdict import PhaseOutcome, first_below, judge
from xds_lab.demo.window import Served, summarize_window

BEFORE = PhaseOutcome(weight_end=85, weight_min=50, share=0.27, requests=70)
DURING = PhaseOutcome(weight_end=25, weight_min=25, share=0.06, requests=60)
AFTER = PhaseOutcome(weight_end=80, weight_min=25, share=0.25, requests=62)


def test_a_fall_then_a_recovery_is_ok_and_tells_the_story() -> None:
    verdict = judge(server="h100-0", before=BEFORE, during=DURING, after=AFTER)
    assert verdict.ok
    assert verdict.message.startswith("OK: h100-0")
    assert "85 -> 25" in verdict.message
    assert "27% -> 6%" in verdict.message


def test_the_story_tells_when_the_weight_first_fell() -> None:
    looks = [(100.0, 85), (101.0, 85), (107.5, 55), (108.0, 85), (109.0, 25)]
    fell = first_below(looks, level=85, since=100.0)
    assert fell == pytest.approx(7.5)
    verdict = judge(server="h100-0", before=BEFORE, during=DURING, after=AFTER, fell_after_s=fell)
    assert verdict.fell_after_s == fell
    assert "85 -> 25 during the fault (first lower 7.5 s in) -> 80" in verdict.message
    assert first_below(looks[:2], level=85, since=100.0) is None


@pytest.mark.parametrize(
    ("during", "after", "problem"),
    [
        (PhaseOutcome(80, 75, 0.06, 60), AFTER, "its weight did not fall"),
        (PhaseOutcome(25, 25, 0.25, 60), AFTER, "traffic did not move away"),
        (PhaseOutcome(25, 25, 0.0, 0), AFTER, "traffic did not move away"),
        (DURING, PhaseOutcome(35, 25, 0.1, 60), "its weight did not come back"),
    ],
)
def test_each_missing_effect_fails_and_is_named(
    during: PhaseOutcome, after: PhaseOutcome, problem: str
) -> None:
    verdict = judge(server="h100-0", before=BEFORE, during=during, after=after)
    assert not verdict.ok
    assert verdict.message.startswith("FAIL: ")
    assert problem in verdict.message


def test_window_counts_by_finish_time_and_shares_only_successes() -> None:
    served = [
        Served("a", started=0.0, finished=1.0, ok=True, ttft_s=0.1),
        Served("a", started=0.0, finished=2.0, ok=True, ttft_s=0.3),
        Served("b", started=0.0, finished=2.5, ok=True, ttft_s=None),
        Served("b", started=0.0, finished=3.0, ok=False),
        Served("a", started=0.0, finished=9.0, ok=True, ttft_s=5.0),  # after the window
        Served("", started=0.0, finished=2.0, ok=False),  # no server answered (Envoy's own error)
    ]
    window = summarize_window(served, servers=["a", "b", "c"], since=1.0, until=5.0)
    assert window["a"].requests == 2
    assert window["a"].share == pytest.approx(2 / 3)
    assert window["a"].ttft_p50_s == pytest.approx(0.2)
    assert window["b"].requests == 1
    assert window["b"].errors == 1
    assert window["b"].ttft_p50_s is None
    assert window["c"].requests == 0
    assert window["c"].share == 0.0


def test_phases_split_the_duration_with_the_fault_in_the_middle() -> None:
    phases = plan(50)
    assert [p.name for p in phases] == ["warm-up", "fault", "recovery"]
    assert [p.fault for p in phases] == [False, True, False]
    assert sum(p.seconds for p in phases) == pytest.approx(50)
    assert sum(p.seconds for p in plan(None)) > 50


def test_window_by_start_counts_what_envoy_routed_in_it() -> None:
    served = [
        Served("a", started=0.5, finished=9.0, ok=True),  # routed in the window, back later
        Served("b", started=1.5, finished=2.0, ok=True),
        Served("b", started=-1.0, finished=1.5, ok=True),  # routed before the window
    ]
    window = summarize_window(served, servers=["a", "b"], since=0.0, until=5.0, by="started")
    assert window["a"].requests == 1
    assert window["b"].requests == 1
    assert window["a"].share == pytest.approx(0.5)
