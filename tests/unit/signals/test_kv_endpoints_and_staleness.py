"""Where each server publishes (the pool's ports, or its own), and when silence is staleness."""

from __future__ import annotations

from xds_control.config import Pool
from xds_control.discovery.static import to_endpoints
from xds_control.signals.kv_events import is_stale, kv_endpoints
from xds_control.signals.kv_subscriber import KvStatus


def _pool(kv_events: object) -> Pool:
    return Pool.model_validate(
        {
            "name": "chat",
            "kv_events": kv_events,
            "endpoints": [
                {"address": "10.0.0.1:8000"},
                {"address": "10.0.0.2:8000", "kv_events": {"port": 7001}},
                {"address": "[fd00::3]:8000", "kv_events": {"port": 7002, "replay_port": 7003}},
            ],
        }
    )


def test_servers_publish_on_the_pools_ports_unless_they_name_their_own() -> None:
    pool = _pool({"topic": "kv"})
    found = kv_endpoints(pool, to_endpoints(pool.endpoints))
    assert [(e.server, e.events, e.replay, e.topic) for e in found] == [
        ("10.0.0.1:8000", "tcp://10.0.0.1:5557", "tcp://10.0.0.1:5558", "kv"),
        ("10.0.0.2:8000", "tcp://10.0.0.2:7001", "tcp://10.0.0.2:5558", "kv"),
        ("[fd00::3]:8000", "tcp://[fd00::3]:7002", "tcp://[fd00::3]:7003", "kv"),
    ]


def test_no_replay_port_and_no_kv_events() -> None:
    pool = _pool({"replay_port": None})
    assert kv_endpoints(pool, to_endpoints(pool.endpoints))[0].replay is None
    plain = _pool(None)
    assert kv_endpoints(plain, to_endpoints(plain.endpoints)) == ()


def _status(*, age: float | None, subscribed: float = 60.0) -> KvStatus:
    return KvStatus(
        server="10.0.0.1:8000",
        events="tcp://10.0.0.1:5557",
        last_seq=3,
        last_event_age_s=age,
        subscribed_s=subscribed,
        layout=None,
        batches=4,
        refused=0,
        restarts=0,
        lost=0,
    )


def test_silence_is_staleness_only_from_a_healthy_busy_server() -> None:
    silent = _status(age=30.0)
    assert is_stale(silent, healthy=True, busy=True, stale_after_s=10)
    assert not is_stale(silent, healthy=True, busy=False, stale_after_s=10)  # idle: silent
    assert not is_stale(silent, healthy=False, busy=True, stale_after_s=10)
    assert not is_stale(_status(age=2.0), healthy=True, busy=True, stale_after_s=10)
    never = _status(age=None, subscribed=30.0)
    assert is_stale(never, healthy=True, busy=True, stale_after_s=10)
    assert not is_stale(
        _status(age=None, subscribed=3.0), healthy=True, busy=True, stale_after_s=10
    )
