"""Must show 6 (part): same seed, same sequence; the shapes the workloads promise."""

from __future__ import annotations

import itertools
import statistics

import pytest

from xds_lab.loadgen.workloads import LoadSpec, build_requests, fingerprint
from xds_lab.sim.tokens import chat_tokens, count_tokens


@pytest.mark.parametrize("workload", ["chat", "shared-prefix", "multi-turn"])
def test_same_seed_same_sequence_and_another_seed_differs(workload: str) -> None:
    spec = LoadSpec(workload=workload, requests=200, rate=50, seed=42, stream_fraction=0.5)
    first, second = build_requests(spec), build_requests(spec)
    assert first == second
    assert fingerprint(first) == fingerprint(second)
    other = build_requests(spec.model_copy(update={"seed": 43}))
    assert fingerprint(other) != fingerprint(first)
    assert [r.at for r in other] != [r.at for r in first]


def test_chat_lengths_and_arrivals_follow_the_requested_distributions() -> None:
    spec = LoadSpec(requests=20000, rate=200, seed=7)
    requests = build_requests(spec)
    prompts = [r.prompt_tokens for r in requests]
    outputs = [r.max_tokens for r in requests]
    assert statistics.mean(prompts) == pytest.approx(730, rel=0.05)
    assert statistics.mean(outputs) == pytest.approx(300, rel=0.05)
    # A long tail: the 99th percentile is many times the median, and caps hold.
    assert statistics.quantiles(prompts, n=100)[98] > 4 * statistics.median(prompts)
    assert max(prompts) <= spec.input_cap
    assert max(outputs) <= spec.output_cap
    gaps = [b.at - a.at for a, b in itertools.pairwise(requests)]
    assert statistics.mean(gaps) == pytest.approx(1 / spec.rate, rel=0.05)
    # Exponential gaps: the standard deviation equals the mean.
    assert statistics.stdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.1)


def test_token_counts_use_the_simulators_rule() -> None:
    for r in build_requests(LoadSpec(requests=50, seed=1)):
        assert r.prompt_tokens == len(chat_tokens(r.body["messages"]))
    for r in build_requests(LoadSpec(requests=50, seed=1, api="completions")):
        assert r.prompt_tokens == count_tokens(r.body["prompt"])
        assert r.path == "/v1/completions"


def test_shared_prefix_groups_share_system_prompt_and_header() -> None:
    spec = LoadSpec(workload="shared-prefix", groups=3, system_tokens=256, requests=300, seed=5)
    by_header: dict[str, set[str]] = {}
    for r in build_requests(spec):
        by_header.setdefault(r.headers["x-prefix-hash"], set()).add(
            r.body["messages"][0]["content"]
        )
    assert len(by_header) == 3
    assert all(len(systems) == 1 for systems in by_header.values())


def test_multi_turn_sessions_grow_their_history_and_carry_the_session_header() -> None:
    spec = LoadSpec(workload="multi-turn", turns=3, requests=30, seed=9, session_header="x-s")
    sessions: dict[str, list[list[dict[str, str]]]] = {}
    for r in build_requests(spec):
        sessions.setdefault(r.headers["x-s"], []).append(r.body["messages"])
    for turns in sessions.values():
        for earlier, later in itertools.pairwise(turns):
            assert later[: len(earlier)] == earlier  # each turn extends the previous prompt


def test_stream_fraction_is_honoured() -> None:
    requests = build_requests(LoadSpec(requests=2000, stream_fraction=0.3, seed=3))
    share = sum(r.stream for r in requests) / len(requests)
    assert share == pytest.approx(0.3, abs=0.04)


def test_multi_turn_sessions_offer_the_whole_rate_from_the_first_seconds() -> None:
    # Sessions already under way at t=0: a short ramp step offers what it says, not the
    # fraction of the rate that sessions all starting at once would send in their first turns.
    spec = LoadSpec(workload="multi-turn", turns=4, think_time_s=2.0, rate=20, requests=2000)
    for seed in (1, 2):
        at = [r.at for r in build_requests(spec.model_copy(update={"seed": seed}))]
        assert sum(1 for t in at if t < 6) / 6 == pytest.approx(20, rel=0.2)
        assert at[-1] == pytest.approx(2000 / 20, rel=0.1)
