"""The held requests' order and bounds: tenants within their share first, then bands, tenants in
turn, arrival within a tenant."""

from __future__ import annotations

from xds_control.flow import Band, FlowQueues, Held


def _held(name: str, *, band: Band = Band.MEDIUM, tenant: str = "", at: float = 0.0) -> Held:
    return Held(request=name, band=band, tenant=tenant, size=10, arrived=at)


def _drain(queues: FlowQueues) -> list[object]:
    out = []
    while (held := queues.pop()) is not None:
        out.append(held.request)
    return out


def test_a_higher_band_goes_first_whatever_came_before() -> None:
    queues = FlowQueues(max_queued=10, max_bytes=1000)
    for held in (_held("m1"), _held("h1", band=Band.HIGH), _held("c1", band=Band.CRITICAL)):
        assert queues.push(held) is None
    assert _drain(queues) == ["c1", "h1", "m1"]


def test_tenants_take_turns_so_a_heavy_one_cannot_starve_a_light_one() -> None:
    queues = FlowQueues(max_queued=20, max_bytes=1000)
    for n in range(4):
        queues.push(_held(f"heavy{n}", tenant="heavy", at=n))
    queues.push(_held("light0", tenant="light", at=5))
    queues.push(_held("light1", tenant="light", at=6))
    assert _drain(queues) == ["heavy0", "light0", "heavy1", "light1", "heavy2", "heavy3"]


def test_a_full_band_refuses_and_another_band_still_takes() -> None:
    queues = FlowQueues(max_queued=2, max_bytes=1000)
    assert [queues.push(_held(f"m{n}")) for n in range(3)] == [None, None, "queue-full"]
    assert queues.push(_held("c", band=Band.CRITICAL)) is None
    assert len(queues) == 3


def test_bytes_bound_all_bands_together() -> None:
    queues = FlowQueues(max_queued=100, max_bytes=25)  # each held weighs 10
    assert queues.push(_held("a")) is None
    assert queues.push(_held("b", band=Band.HIGH)) is None
    assert queues.push(_held("c", band=Band.CRITICAL)) == "queue-full"
    queues.pop()
    assert queues.bytes == 10
    assert queues.push(_held("c", band=Band.CRITICAL)) is None


def test_a_removed_request_leaves_no_trace() -> None:
    queues = FlowQueues(max_queued=10, max_bytes=1000)
    old, young = _held("old", tenant="t", at=0.0), _held("young", tenant="t", at=8.0)
    for held in (old, young):
        queues.push(held)
    assert queues.remove(old)
    assert not queues.remove(old)
    assert _drain(queues) == ["young"]
    assert queues.bytes == 0
    assert queues.tenants() == set()


def test_a_tenant_over_its_share_waits_behind_the_others_whatever_the_band() -> None:
    queues = FlowQueues(max_queued=20, max_bytes=1000)
    queues.push(_held("heavy-critical", band=Band.CRITICAL, tenant="heavy"))
    queues.push(_held("heavy-medium", tenant="heavy"))
    queues.push(_held("light-medium", tenant="light"))
    queues.push(_held("light-high", band=Band.HIGH, tenant="light"))
    assert queues.tenants() == {"heavy", "light"}
    order = []
    while (held := queues.pop(over={"heavy"})) is not None:
        order.append(held.request)
    # Within its share the light tenant's bands decide; then the heavy tenant's.
    assert order == ["light-high", "light-medium", "heavy-critical", "heavy-medium"]


def test_band_names_are_the_limits_classes() -> None:
    assert [Band.of(n) for n in ("critical", "HIGH", "medium", "", "urgent")] == [
        Band.CRITICAL,
        Band.HIGH,
        Band.MEDIUM,
        Band.MEDIUM,
        Band.MEDIUM,
    ]
