"""The benchmark's pure judgements: seeds into median and min-max, the capacity ramp's step
and the capacity check, lag flags, run length, and the ideal picker's choice."""

from __future__ import annotations

import math
from typing import Any

import pytest

from xds_lab.bench.aggregate import aggregate_points, rests_on
from xds_lab.bench.capacity_judge import capacity_verdict, keep_up_share
from xds_lab.bench.ideal import ServerView, pick
from xds_lab.bench.lag import lag_flag
from xds_lab.bench.rigor import FULL, QUICK, headline_load
from xds_lab.loadgen.client import Result
from xds_lab.loadgen.loop_lag import lag_summary
from xds_lab.loadgen.stats import Slo
from xds_lab.sim.profiles import get_profile


def _point(policy: str, p99: float, *, flag: str = "", requests: int = 600) -> dict[str, Any]:
    return {
        "policy": policy,
        "load": 0.8,
        "ours": False,
        "requests": requests,
        "ttft_p99_s": p99,
        "goodput_rps": 10.0,
        "lag_flag": flag,
        "ttft_s": [p99],
    }


def test_seeds_become_median_with_min_and_max_and_flagged_seeds_are_left_out() -> None:
    points = [
        _point("lr", 3.0),
        _point("lr", 1.0, requests=610),
        _point("lr", 9.0, flag="fleet p99 loop lag 80 ms > 50 ms"),
        _point("lr", 2.0, requests=605),
        _point("rr", 5.0),
    ]
    rows = {r["policy"]: r for r in aggregate_points(points)}
    lr = rows["lr"]
    assert lr["ttft_p99_s"] == 2.0  # median of 3, 1, 2: the lagged 9 s is not a result
    assert lr["range"]["ttft_p99_s"] == (1.0, 3.0)
    assert (lr["seeds"], lr["flagged"]) == (3, 1)
    assert lr["requests"] == 600  # the thinnest seed: what each percentile rests on at least
    assert rows["rr"]["seeds"] == 1
    assert rows["rr"]["range"]["ttft_p99_s"] == (5.0, 5.0)


def test_a_point_whose_every_seed_lagged_is_no_result() -> None:
    (row,) = aggregate_points([_point("lr", 3.0, flag="loadgen lagged")])
    assert row["seeds"] == 0
    assert row["flagged"] == 1
    assert "ttft_p99_s" not in row


@pytest.mark.parametrize(("requests", "q", "tail"), [(600, 99, 6), (100, 99, 1), (600, 90, 60)])
def test_a_percentile_rests_on_the_requests_above_it(requests: int, q: float, tail: int) -> None:
    assert rests_on(requests, q) == tail


def _result(
    at: float, *, ttft: float | None, ok: bool = True, tokens: int = 11, e2e: float | None = None
) -> Result:
    """Ten tokens after the first within 0.5 s (TPOT 50 ms) unless ``e2e`` says otherwise."""
    return Result(
        index=0,
        scheduled=at,
        started=at,
        status=200 if ok else 0,
        e2e_s=(ttft or 0.0) + 0.5 if e2e is None else e2e,
        ttft_s=ttft,
        output_tokens=tokens,
    )


SLO = Slo(ttft_s=2.0, tpot_s=0.1)


def test_a_step_is_judged_on_its_second_half_once_the_queue_has_built() -> None:
    # A queue building up: the first half is served at once, the second ever later.
    results = [_result(t / 10, ttft=0.2 if t < 50 else 0.2 + (t - 50) * 0.1) for t in range(100)]
    assert keep_up_share(results, window_s=10.0, slo=SLO) == pytest.approx(19 / 50)
    # Over the whole step 69% kept up: a shorter step would have passed a rate it cannot hold.
    steady = [_result(t / 10, ttft=0.3) for t in range(100)]
    assert keep_up_share(steady, window_s=10.0, slo=SLO) == 1.0
    failed = [_result(t / 10, ttft=None, ok=False) for t in range(100)]
    assert keep_up_share(failed, window_s=10.0, slo=SLO) == 0.0


def test_fast_first_tokens_with_stalled_decoding_are_not_keeping_up() -> None:
    # First tokens in 0.3 s, then 10 tokens in 4.5 s: 450 ms per token, the TPOT objective missed.
    stalled = [_result(t / 10, ttft=0.3, e2e=4.8) for t in range(100)]
    assert keep_up_share(stalled, window_s=10.0, slo=SLO) == 0.0


def test_the_capacity_is_confirmed_only_when_the_best_policy_keeps_up_at_100_percent() -> None:
    rows = [
        {"policy": "lr", "load": 1.0, "seeds": 1, "keep_up_share": 0.5},
        {"policy": "ideal", "load": 1.0, "seeds": 1, "keep_up_share": 0.93},
    ]
    ok = capacity_verdict(rows)
    assert ok["confirmed"] is True
    assert ok["policy"] == "ideal"
    wrong = capacity_verdict([{**rows[1], "keep_up_share": 0.6}])
    assert wrong["confirmed"] is False
    assert "capacity is wrong" in wrong["text"]
    assert capacity_verdict([{**rows[0], "load": 0.8}])["confirmed"] is None


def test_a_point_is_flagged_when_either_process_lags_past_the_limit() -> None:
    calm = lag_summary([0.001] * 99 + [0.004])
    busy = lag_summary([0.001] * 90 + [0.2] * 10)
    assert lag_flag({"loadgen": calm, "fleet": calm}) == ""
    flag = lag_flag({"loadgen": calm, "fleet": busy})
    assert flag.startswith("fleet p99 loop lag")
    assert "loadgen" not in flag
    assert "no lag measured" in lag_flag({"loadgen": calm, "fleet": lag_summary([])})
    assert math.isnan(lag_summary([])["p99_s"])


def test_full_runs_headline_seeds_long_enough_and_adds_the_confirmation_point() -> None:
    assert FULL.seeds >= 3
    # 600 requests at 13.9 req/s need 43 s of arrivals, more than the scenario's 8 s.
    assert FULL.seconds(duration_s=8, rate_sim=13.9, headline=True) * 13.9 >= 600
    assert FULL.seconds(duration_s=8, rate_sim=13.9, headline=False) == 8
    assert FULL.loads((0.5, 0.8), events=False) == (0.5, 0.8, 1.0)
    assert FULL.loads((0.6,), events=True) == (0.6,)
    assert QUICK.seconds(duration_s=3, rate_sim=6, headline=True) == 3
    assert QUICK.loads((0.5,), events=False) == (0.5,)
    assert headline_load((0.2, 0.5, 0.8, 1.0)) == 0.8
    assert headline_load((0.6,)) == 0.6


def _view(name: str, profile: str, **kw: Any) -> ServerView:
    fields = {"hit_tokens": 0, "queued_tokens": 0, "running": 0, **kw}
    return ServerView(name=name, profile=get_profile(profile), **fields)


def test_the_ideal_picker_takes_the_cached_or_the_shortest_queue() -> None:
    idle_h100 = _view("h100", "vllm-h100")
    idle_l4 = _view("l4", "onnxruntime-l4")
    assert pick([idle_l4, idle_h100], prompt_tokens=2000, tpot_s=0.1) == "h100"
    queued_h100 = _view("h100", "vllm-h100", queued_tokens=40_000, running=200)
    assert pick([queued_h100, idle_l4], prompt_tokens=500, tpot_s=0.1) == "l4"
    cached = _view("b", "vllm-h100", hit_tokens=1984, queued_tokens=1000)
    cold = _view("a", "vllm-h100")
    assert pick([cold, cached], prompt_tokens=2000, tpot_s=0.1) == "b"
    # Its queue (3,000 tokens) costs more than the 1,984 tokens it saves this request, less
    # than twice that: the prefill the cold server would redo counts twice, it stays.
    longer = _view("b", "vllm-h100", hit_tokens=1984, queued_tokens=3000)
    assert pick([cold, longer], prompt_tokens=2000, tpot_s=0.1) == "b"
    longest = _view("b", "vllm-h100", hit_tokens=1984, queued_tokens=4000)
    assert pick([cold, longest], prompt_tokens=2000, tpot_s=0.1) == "a"
    slowed = _view("a", "vllm-h100", slowdown=4.0)
    assert (
        pick([slowed, _view("b", "vllm-h100", queued_tokens=500)], prompt_tokens=500, tpot_s=0.1)
        == "b"
    )
