"""A pool is saturated when no healthy server has room: queue, unanswered requests, KV."""

from __future__ import annotations

from xds_control.config.flow import FlowControl
from xds_control.flow import saturated
from xds_control.picker.score import Candidate

NOW = 1000.0
FLOW = FlowControl(queue_depth=5, kv_usage=0.8, max_signal_age_s=5)


def _server(address: str, **fields: object) -> Candidate:
    return Candidate(address=address, weight=10, healthy=True, **fields)  # type: ignore[arg-type]


def test_room_while_the_queue_and_what_the_picker_sent_stay_under_the_depth() -> None:
    a = _server("a", waiting=3.0, observed_at=NOW - 1)
    assert not saturated([a], unanswered={"a": 1}, now=NOW, settings=FLOW)
    assert saturated([a], unanswered={"a": 2}, now=NOW, settings=FLOW)


def test_a_stale_reading_says_nothing_the_unanswered_alone_count() -> None:
    a = _server("a", waiting=50.0, observed_at=NOW - 60)
    assert not saturated([a], unanswered={"a": 4}, now=NOW, settings=FLOW)
    assert saturated([a], unanswered={"a": 5}, now=NOW, settings=FLOW)


def test_a_full_kv_cache_saturates_a_server_with_an_empty_queue() -> None:
    full = _server("a", kv_usage=0.85, kv_observed_at=NOW - 1)
    assert saturated([full], unanswered={}, now=NOW, settings=FLOW)
    stale = _server("a", kv_usage=0.85, kv_observed_at=NOW - 60)
    assert not saturated([stale], unanswered={}, now=NOW, settings=FLOW)


def test_one_server_with_room_is_enough_and_no_healthy_server_is_saturated() -> None:
    busy = _server("a", waiting=9.0, observed_at=NOW)
    free = _server("b")
    assert not saturated([busy, free], unanswered={}, now=NOW, settings=FLOW)
    sick = free._replace(healthy=False)
    assert saturated([busy, sick], unanswered={}, now=NOW, settings=FLOW)
    assert saturated([], unanswered={}, now=NOW, settings=FLOW)
