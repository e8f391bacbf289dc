"""The benchmark's ``picker`` policy: the pool config it writes, and how a point's picker
statistics are read from the histogram's buckets."""

from __future__ import annotations

import math

import pytest
import yaml

from xds_control.config.load import parse_config
from xds_control.config.model import STREAMED_TRY_IDLE_S
from xds_control.xds import build_route_configuration
from xds_lab.bench.picker_stats import delta, histogram_quantile, snapshot
from xds_lab.bench.policies import POLICIES, control_plane_config


def test_the_picker_policy_writes_a_valid_pool_with_the_picker_and_weighted_maglev() -> None:
    data = control_plane_config(
        policy=POLICIES["picker"],
        batch_slots={"127.0.0.1:9001": 256, "127.0.0.1:9002": 64},
        listener_port=10000,
        picker_address="127.0.0.1:9100",
    )
    pool = parse_config(text=yaml.safe_dump(data)).pools[0]
    assert pool.picker is not None
    assert str(pool.picker.address) == "127.0.0.1:9100"
    assert data["pools"][0]["lb"] == {"policy": "maglev"}
    assert data["signals"] == {"scrape": {"enabled": True}}  # the fallback's engine weights
    with pytest.raises(ValueError, match="picker_address"):
        control_plane_config(policy=POLICIES["picker"], batch_slots={}, listener_port=1)
    assert POLICIES["picker"].ours
    assert POLICIES["picker"].through_envoy
    assert not POLICIES["ideal"].through_envoy


def test_the_events_policy_subscribes_to_each_server_and_gives_the_picker_the_tokenizer() -> None:
    data = control_plane_config(
        policy=POLICIES["picker_events"],
        batch_slots={"127.0.0.1:9001": 256, "127.0.0.1:9002": 64},
        listener_port=10000,
        picker_address="127.0.0.1:9100",
        kv_events={"127.0.0.1:9001": (5557, 5558)},  # the second server publishes none
        tokenizer="/models/lab",
    )
    pool = parse_config(text=yaml.safe_dump(data)).pools[0]
    assert pool.picker is not None
    assert pool.picker.tokenizer == "/models/lab"
    assert pool.kv_events is not None
    published = [e.kv_events for e in pool.endpoints]
    assert published[1] is None
    assert published[0] is not None
    assert (published[0].port, published[0].replay_port) == (5557, 5558)
    with pytest.raises(ValueError, match="tokenizer"):
        control_plane_config(
            policy=POLICIES["picker_events"],
            batch_slots={},
            listener_port=1,
            picker_address="127.0.0.1:9100",
        )
    # The picker without events reads neither.
    plain = control_plane_config(
        policy=POLICIES["picker"],
        batch_slots={"127.0.0.1:9001": 256},
        listener_port=10000,
        picker_address="127.0.0.1:9100",
        kv_events={"127.0.0.1:9001": (5557, 5558)},
        tokenizer="/models/lab",
    )
    assert "kv_events" not in plain["pools"][0]
    assert "tokenizer" not in plain["pools"][0]["picker"]


def test_a_streamed_route_puts_streamed_requests_on_a_route_with_a_per_try_idle_bound() -> None:
    data = control_plane_config(
        policy=POLICIES["maglev_weights"],
        batch_slots={"127.0.0.1:9001": 256},
        listener_port=10000,
        streamed_route=True,
    )
    config = parse_config(text=yaml.safe_dump(data))
    assert config.listeners[0].classify is not None
    table = build_route_configuration(config.listeners[0], model_header=config.model_header)
    streamed, rest = (r.route.retry_policy for r in table.virtual_hosts[0].routes)
    assert streamed.per_try_idle_timeout.seconds == STREAMED_TRY_IDLE_S
    assert not rest.HasField("per_try_idle_timeout")
    assert rest.num_retries.value == 2


def test_histogram_quantiles_interpolate_within_buckets_and_floor_the_overflow() -> None:
    buckets = {0.001: 50.0, 0.002: 99.0, 0.01: 99.0, math.inf: 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.001)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.0005)
    assert histogram_quantile(0.995, buckets) == 0.01  # past the last bound: at least it
    assert math.isnan(histogram_quantile(0.5, {math.inf: 0.0}))


_METRICS = """\
# TYPE xds_control_picker_pick_seconds histogram
xds_control_picker_pick_seconds_bucket{{le="0.0001"}} {a}
xds_control_picker_pick_seconds_bucket{{le="0.001"}} {b}
xds_control_picker_pick_seconds_bucket{{le="+Inf"}} {b}
xds_control_picker_pick_seconds_count {b}
xds_control_picker_pick_seconds_sum 0.01
# TYPE xds_control_picker_picks_total counter
xds_control_picker_picks_total{{pool="chat",outcome="held"}} {a}
"""


def test_a_points_picker_statistics_are_the_difference_of_two_snapshots() -> None:
    key = "http.gateway.ext_proc.picker.streams_started"
    before = snapshot(metrics_text=_METRICS.format(a=10, b=10), envoy_stats={key: 10})
    after = snapshot(metrics_text=_METRICS.format(a=10, b=30), envoy_stats={key: 30})
    got = delta(before, after)
    assert got["observations"] == 20
    assert got["picks"] == {"held": 0}
    assert got["envoy"]["streams_started"] == 20
    assert 0.0001 < got["pick_p50_s"] < 0.001
    assert not got["pick_p99_at_least"]
