"""The flow-overhead benchmark's reading of the control plane's histogram and its paired
summary."""

from __future__ import annotations

from xds_lab.bench.flow_overhead import ARMS, bucket_quantile, check_buckets, summarise

METRICS = """\
# HELP xds_control_flow_check_seconds Time flow control spends on a request.
# TYPE xds_control_flow_check_seconds histogram
xds_control_flow_check_seconds_bucket{le="0.0001",phase="admit"} 50.0
xds_control_flow_check_seconds_bucket{le="0.0005",phase="admit"} 99.0
xds_control_flow_check_seconds_bucket{le="+Inf",phase="admit"} 100.0
xds_control_flow_check_seconds_count{phase="admit"} 100.0
xds_control_flow_check_seconds_bucket{le="1e-05",phase="end"} 100.0
xds_control_flow_check_seconds_bucket{le="+Inf",phase="end"} 100.0
xds_control_other_bucket{le="1.0"} 3.0
"""


def test_buckets_are_read_per_phase_in_order_and_quantiles_are_their_upper_bounds() -> None:
    phases = check_buckets(METRICS)
    assert set(phases) == {"admit", "end"}
    admit = phases["admit"]
    assert [bound for bound, _ in admit] == [0.0001, 0.0005, float("inf")]
    assert bucket_quantile(admit, 0.5) == 0.0001
    assert bucket_quantile(admit, 0.99) == 0.0005
    assert bucket_quantile(phases["end"], 0.99) == 1e-05


def test_a_constant_difference_between_arms_shows_in_every_round_and_the_interval() -> None:
    rounds = []
    for r in range(10):
        base = [float(v + r) for v in range(100)]
        rounds.append({arm: [v + (2.0 if arm == "flow" else 0.0) for v in base] for arm in ARMS})
    rows = {row[0]: row for row in summarise(rounds, seed=1)}
    assert rows["flow"][4] == "+2.00"
    assert rows["flow"][5] == "+2.00 .. +2.00"
    assert rows["flow+usage"][4] == "+0.00"
    assert rows["picker"][4] == ""
