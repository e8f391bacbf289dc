"""Capacity from the data path: Envoy's time per response byte times every server alike. Where an
endpoint also exports a decode step, the ratio of the two puts the data path's readings on the
engines' scale, so a Triton server (compute per request only) and a server with no metrics at
all get a capacity that compares with vLLM's in one pool."""

from __future__ import annotations

import pytest

from engine_rows import NOW, a_sample, an_endpoint
from xds_control.config import Engine, Pool, WeightPolicy, parse_config
from xds_control.discovery import Endpoint
from xds_control.engine import WeightDecision, compute_weights, fleet_step_scale, states_of
from xds_control.engine.pool_weights import compute_route_weights
from xds_control.signals import Sample, Signal

BYTES_PER_TOKEN = 12.0


def cycles(
    pool: Pool,
    endpoints: list[Endpoint],
    samples: dict[str, Sample],
    *,
    data_path: bool = True,
    n: int = 10,
) -> dict[str, WeightDecision]:
    previous: dict[str, WeightDecision] = {}
    for cycle in range(n):
        previous = compute_weights(
            pool=pool,
            endpoints=endpoints,
            samples=samples,
            previous=states_of(previous),
            now=NOW + cycle,
            data_path=data_path,
        )
    return previous


def test_a_triton_server_is_timed_by_the_data_path_on_the_vllm_servers_scale() -> None:
    pool = Pool(name="mixed", engine=Engine.VLLM)
    h100, a100, triton = an_endpoint(1), an_endpoint(2), an_endpoint(3, Engine.TRITON)
    samples = {
        h100.address: a_sample(
            h100.address, decode_step_s=0.02, datapath_step_s=0.02 / BYTES_PER_TOKEN
        ),
        a100.address: a_sample(
            a100.address, decode_step_s=0.04, datapath_step_s=0.04 / BYTES_PER_TOKEN
        ),
        # Its decode step is 0.08 s, which its own metrics (a whole request's compute) hide.
        triton.address: a_sample(
            triton.address, exec_compute_s=3.0, datapath_step_s=0.08 / BYTES_PER_TOKEN
        ),
    }
    out = cycles(pool, [h100, a100, triton], samples)
    estimate = {
        e.address: out[e.address].explanation.capacity_estimate for e in (h100, a100, triton)
    }
    assert estimate[triton.address] == pytest.approx(64 / 0.08)
    assert estimate[a100.address] == pytest.approx(64 / 0.04)
    assert out[h100.address].weight > out[a100.address].weight > out[triton.address].weight
    assert "capacity: decode step (engine)" in out[h100.address].explanation.reason
    assert "on the engines' decode-step scale" in out[triton.address].explanation.reason
    assert out[h100.address].state.step_scale == pytest.approx(BYTES_PER_TOKEN)


@pytest.mark.parametrize("engine", [Engine.TRITON, None], ids=["triton", "no-metrics"])
def test_a_server_with_no_reading_this_cycle_stays_on_the_data_path_s_line(
    engine: Engine | None,
) -> None:
    """Three servers timed by the data path beside one vLLM server: Triton servers, or
    servers of the pool's own engine that export no metrics (a proxy in front of a hosted
    model). Two of them go a few cycles with no request finished (no data-path reading). They
    are still the data path's, not counted among the decode-step servers, whose line (and so
    the vLLM server's capacity) their kept readings, in the data path's units, would pull
    off."""
    pool = Pool(name="mixed", engine=Engine.VLLM)
    h100 = an_endpoint(1)
    others = [an_endpoint(i, engine) for i in (2, 3, 4)]
    idle = others[1:]

    def sample(endpoint: Endpoint, at: float) -> Sample:
        values = {Signal.DATAPATH_STEP_S: 0.08 / BYTES_PER_TOKEN, Signal.DATAPATH_RATE: 2.0}
        if engine is Engine.TRITON:
            values[Signal.EXEC_COMPUTE_S] = 3.0
        if endpoint is h100:
            values = {Signal.DECODE_STEP_S: 0.02, Signal.DATAPATH_STEP_S: 0.02 / BYTES_PER_TOKEN}
        elif endpoint in idle and at >= NOW + 10:
            del values[Signal.DATAPATH_STEP_S]
        return Sample.build(
            address=endpoint.address, values=values.items(), observed_at=at, source="test"
        )

    endpoints = [h100, *others]
    history: list[dict[str, WeightDecision]] = [{}]
    for cycle in range(15):
        at = NOW + cycle
        history.append(
            compute_weights(
                pool=pool,
                endpoints=endpoints,
                samples={e.address: sample(e, at) for e in endpoints},
                previous=states_of(history[-1]),
                now=at,
                data_path=True,
            )
        )
    before, after = history[10], history[-1]
    assert after[h100.address].explanation.capacity_estimate == pytest.approx(64 / 0.02)
    assert after[h100.address].weight == before[h100.address].weight
    if engine is Engine.TRITON:  # still fresh (its compute time): its reason names the source
        for t in idle:
            assert (
                "capacity: time per response byte (data path)"
                in after[t.address].explanation.reason
            )


def test_without_the_data_path_the_triton_server_is_still_assumed_typical() -> None:
    pool = Pool(name="mixed", engine=Engine.VLLM)
    h100, triton = an_endpoint(1), an_endpoint(3, Engine.TRITON)
    samples = {
        h100.address: a_sample(h100.address, decode_step_s=0.02),
        triton.address: a_sample(triton.address, exec_compute_s=3.0),
    }
    out = cycles(pool, [h100, triton], samples, data_path=False)
    assert out[triton.address].explanation.capacity_estimate is None
    assert "capacity: none: assumed typical" in out[triton.address].explanation.reason


def test_servers_with_no_metrics_are_ordered_by_the_data_path_alone() -> None:
    pool = Pool(name="plain", engine=Engine.VLLM)  # no metrics endpoint answers at all
    fast, middle, slow = an_endpoint(1), an_endpoint(2), an_endpoint(3)
    per_byte = {fast: 0.001, middle: 0.002, slow: 0.004}
    samples = {
        e.address: a_sample(e.address, datapath_step_s=s, datapath_rate=2.0)
        for e, s in per_byte.items()
    }
    out = cycles(pool, list(per_byte), samples)
    weights = [out[e.address].weight for e in (fast, middle, slow)]
    assert weights[0] > weights[1] > weights[2]
    assert out[fast.address].state.factors.capacity == pytest.approx(1.0)
    for e in per_byte:
        assert (
            "fresh signals" in out[e.address].explanation.reason
        )  # not stale: the data path is a signal
        assert "capacity: time per response byte (data path)" in out[e.address].explanation.reason


def test_a_server_with_no_metrics_that_misses_its_ttft_target_is_judged_by_the_data_path() -> None:
    # Two alike servers with no metrics; Envoy saw one meet the TTFT target for 90% of its
    # requests and the other for 30%: the SLO factor reads that as a server's own histogram
    # (not averaged here: slo_alpha 1).
    pool = Pool(name="plain", engine=Engine.VLLM, weights=WeightPolicy(slo_alpha=1.0))
    meets, misses = an_endpoint(1), an_endpoint(2)
    samples = {
        e.address: a_sample(e.address, datapath_step_s=0.001, datapath_slo_ttft=met)
        for e, met in ((meets, 0.9), (misses, 0.3))
    }
    out = cycles(pool, [meets, misses], samples)
    assert out[meets.address].state.factors.slo == 1.0
    assert out[misses.address].state.factors.slo == pytest.approx(1.0 - 0.3 * 0.6, abs=0.02)
    assert out[misses.address].weight < out[meets.address].weight


def test_prefill_stalls_in_the_data_path_reading_are_taken_out() -> None:
    """Two identical servers, one with twice the other's share of a prompt-heavy load: its
    streams stall more, its time per byte reads slower, and the fit in the prefill work the
    data path sees (in flight x request bytes per response byte) takes that back out."""
    pool = Pool(name="plain", engine=Engine.VLLM)
    busy, quiet = an_endpoint(1), an_endpoint(2)
    decode_s, prefill_s_per_work = 0.001, 0.00005
    previous: dict[str, WeightDecision] = {}
    for cycle in range(60):
        samples = {}
        for endpoint, share in ((busy, 2.0), (quiet, 1.0)):
            inflight = share * (8 + 4 * (cycle % 3))  # the load wanders around its mean
            work = inflight * 0.5
            samples[endpoint.address] = a_sample(
                endpoint.address,
                datapath_step_s=decode_s + prefill_s_per_work * work,
                datapath_inflight=inflight,
                datapath_prompt_ratio=0.5,
            )
        previous = compute_weights(
            pool=pool,
            endpoints=[busy, quiet],
            samples=samples,
            previous=states_of(previous),
            now=NOW + cycle,
            data_path=True,
        )
    busy_estimate = previous[busy.address].explanation.capacity_estimate
    quiet_estimate = previous[quiet.address].explanation.capacity_estimate
    assert busy_estimate is not None
    assert quiet_estimate is not None
    assert busy_estimate == pytest.approx(quiet_estimate, rel=0.1)


ROUTE_OVER_ENGINES = """
pools:
  - {name: h100, engine: vllm, endpoints: [{address: 10.0.0.1:8000, batch_slots: 64}]}
  - {name: a100, engine: triton, endpoints: [{address: 10.0.0.2:8000, batch_slots: 64}]}
listeners:
  - name: gw
    address: 127.0.0.1:10000
    routes:
      - {name: all, pools: [{name: h100}, {name: a100}]}
"""


def test_a_route_over_a_vllm_and_a_triton_pool_is_weighed_on_the_fleet_s_scale() -> None:
    """The Triton pool has no engine step of its own to scale its data-path readings by: the
    fleet's (the vLLM pool's) puts them on one scale, and the route splits by capacity."""
    config = parse_config(text=ROUTE_OVER_ENGINES)
    h100, a100 = config.pool("h100"), config.pool("a100")
    samples = {
        "10.0.0.1:8000": a_sample(
            "10.0.0.1:8000", decode_step_s=0.02, datapath_step_s=0.02 / BYTES_PER_TOKEN
        ),
        "10.0.0.2:8000": a_sample(
            "10.0.0.2:8000", exec_compute_s=3.0, datapath_step_s=0.04 / BYTES_PER_TOKEN
        ),
    }
    decisions: dict[str, dict[str, WeightDecision]] = {"h100": {}, "a100": {}}
    for cycle in range(10):
        every = {a: d.state for pool in decisions.values() for a, d in pool.items()}
        scale = fleet_step_scale(states=every, samples=samples)
        for pool, endpoint in ((h100, an_endpoint(1)), (a100, an_endpoint(2, Engine.TRITON))):
            decisions[pool.name] = compute_weights(
                pool=pool,
                endpoints=[endpoint],
                samples=samples,
                previous=states_of(decisions[pool.name]),
                now=NOW + cycle,
                data_path=True,
                fleet_scale=scale,
            )
    by_pool = {name: tuple(found.values()) for name, found in decisions.items()}
    assert by_pool["a100"][0].explanation.capacity_estimate == pytest.approx(64 / 0.04)
    weights = compute_route_weights(
        config=config, decisions=by_pool, previous={}, now=NOW, data_path=True
    )
    assert {p: w.weight for p, w in weights["gw/all"].items()} == {"h100": 100, "a100": 50}
    # Without the data path the two are different measures: static weights.
    assert compute_route_weights(config=config, decisions=by_pool, previous={}, now=NOW) == {}


def test_one_stalled_engine_window_does_not_move_the_other_pool_s_capacity() -> None:
    """One H100's engine step catches a long prefill stall that its data-path window does not
    (1.6 s against 20 ms, two cycles running, as traced in a benchmark): the fleet's step scale,
    which puts the Triton pool on the vLLM servers' scale, stays where the two H100s agree, and
    so does the Triton pool's capacity."""
    pools = {
        "h100": Pool(name="h100", engine=Engine.VLLM),
        "a100": Pool(name="a100", engine=Engine.TRITON),
    }
    members = {"h100": [an_endpoint(1), an_endpoint(3)], "a100": [an_endpoint(2)]}
    decisions: dict[str, dict[str, WeightDecision]] = {"h100": {}, "a100": {}}
    estimates = []
    for cycle in range(30):
        at = NOW + cycle
        stalled = 1.6 if cycle in (10, 11) else 0.02
        path_step = 0.02 / BYTES_PER_TOKEN
        samples = {
            "10.0.0.1:8000": a_sample(
                "10.0.0.1:8000", at=at, decode_step_s=stalled, datapath_step_s=path_step
            ),
            "10.0.0.3:8000": a_sample(
                "10.0.0.3:8000", at=at, decode_step_s=0.02, datapath_step_s=path_step
            ),
            "10.0.0.2:8000": a_sample(
                "10.0.0.2:8000",
                at=at,
                exec_compute_s=3.0,
                datapath_step_s=0.04 / BYTES_PER_TOKEN,
            ),
        }
        every = {a: d.state for found in decisions.values() for a, d in found.items()}
        scale = fleet_step_scale(states=every, samples=samples)
        for name, pool in pools.items():
            decisions[name] = compute_weights(
                pool=pool,
                endpoints=members[name],
                samples=samples,
                previous=states_of(decisions[name]),
                now=NOW + cycle,
                data_path=True,
                fleet_scale=scale,
            )
        estimates.append(decisions["a100"]["10.0.0.2:8000"].explanation.capacity_estimate)
    assert all(e == pytest.approx(64 / 0.04, rel=0.1) for e in estimates), estimates
