"""Ranking: weighted rendezvous on the template key, a server holding the prompt's prefix first
unless the engine finds it far worse than the best server."""

from __future__ import annotations

from collections import Counter

from xds_control.picker.score import Candidate, costs, prompt_terms, rank


def _fleet(*weights: int) -> list[Candidate]:
    return [
        Candidate(address=f"10.0.0.{i}:8000", weight=w, healthy=True) for i, w in enumerate(weights)
    ]


def _first(candidates: list[Candidate], key: bytes, holder: str | None = None) -> str:
    cached = {} if holder is None else {holder: 100.0}
    return rank(candidates, key=key, cached=cached, affinity=4.0, move_cost=2.0, count=1).order[0]


def test_same_prefix_same_server_and_fallbacks_are_distinct() -> None:
    fleet = _fleet(10, 10, 10, 10)
    order = rank(fleet, key=b"k", affinity=4.0, move_cost=2.0, count=3).order
    assert order == rank(fleet, key=b"k", affinity=4.0, move_cost=2.0, count=3).order
    assert len(order) == len(set(order)) == 3


def test_new_prefixes_split_by_weight() -> None:
    fleet = _fleet(10, 30, 60)
    counts = Counter(_first(fleet, f"prefix-{i}".encode()) for i in range(3000))
    shares = [counts[c.address] / 3000 for c in fleet]
    assert [round(s, 1) for s in shares] == [0.1, 0.3, 0.6], shares


def test_a_server_leaving_moves_only_its_own_prefixes() -> None:
    fleet = _fleet(10, 20, 30, 40)
    keys = [f"p{i}".encode() for i in range(500)]
    before = {k: _first(fleet, k) for k in keys}
    gone = fleet[2].address
    after = {k: _first([c for c in fleet if c.address != gone], k) for k in keys}
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == gone}


def test_holder_first_unless_the_engine_finds_it_much_worse() -> None:
    fleet = _fleet(20, 50, 50)
    key = b"some prefix"
    holder = next(c.address for c in fleet if c.address != _first(fleet, key))
    fleet_with_weak_holder = [c._replace(weight=10) if c.address == holder else c for c in fleet]
    assert _first(fleet, key, holder=holder) == holder  # 20 x 4 >= 50: the cache hit wins
    assert _first(fleet_with_weak_holder, key, holder=holder) != holder  # 10 x 4 < 50
    assert _first(fleet, key, holder="10.9.9.9:1") == _first(fleet, key)  # gone: ignored


def test_only_healthy_servers_are_named() -> None:
    fleet = _fleet(10, 10, 10)
    sick = [fleet[0], fleet[1]._replace(healthy=False), fleet[2]._replace(healthy=False)]
    cached = {fleet[1].address: 100.0}
    assert rank(sick, key=b"k", cached=cached, affinity=4.0, move_cost=2.0, count=3).order == [
        fleet[0].address
    ]
    none = [c._replace(healthy=False) for c in fleet]
    assert rank(none, key=b"k", affinity=4.0, move_cost=2.0, count=3).order == []


def _sized(
    fleet: list[Candidate],
    *,
    tokens: float,
    cached: dict[str, float] | None = None,
    queued: dict[str, float] | None = None,
) -> str:
    return rank(
        fleet,
        key=b"k",
        affinity=4.0,
        move_cost=2.0,
        count=1,
        tokens=tokens,
        cached=cached,
        queued=queued,
    ).order[0]


def test_a_long_prompt_goes_to_the_fast_server_past_a_short_queue() -> None:
    fast, slow = _fleet(50, 50)
    fast, slow = fast._replace(speed=1.0), slow._replace(speed=0.2)
    queued = {fast.address: 600.0}
    # Fast: (600 + 2000) / 1 = 2600; slow: 2000 / 0.2 = 10000.
    assert _sized([fast, slow], tokens=2000, queued=queued) == fast.address
    # A short prompt is cheaper on the idle slow server: 100 / 0.2 = 500 < 700.
    assert _sized([fast, slow], tokens=100, queued=queued) == slow.address


def test_the_holder_wins_when_its_saving_beats_its_queue() -> None:
    holder, other = _fleet(50, 50)

    def first(queued: float) -> str:
        return _sized(
            [holder, other],
            tokens=2100.0,
            cached={holder.address: 2000.0},
            queued={holder.address: queued},
        )

    # The idle other: 2100 uncached + 2000 redone = 4100. Holder: 3900 queued + 100 uncached.
    assert first(3900.0) == holder.address
    # 4100 queued + 100 > 4100: the queue costs more than twice the prefill saved.
    assert first(4100.0) == other.address


def test_a_higher_move_cost_keeps_the_request_on_its_holder_past_a_longer_queue() -> None:
    holder, other = _fleet(50, 50)

    def first(queued: float, move_cost: float) -> str:
        return rank(
            [holder, other],
            key=b"k",
            affinity=4.0,
            move_cost=move_cost,
            count=1,
            tokens=2100.0,
            cached={holder.address: 2000.0},
            queued={holder.address: queued},
        ).order[0]

    # The idle other at 8: 2100 uncached + 7 x 2000 redone = 16100; the holder: queue + 100.
    assert first(15900.0, 8.0) == holder.address
    assert first(16100.0, 8.0) == other.address
    # The same queue at 2 (4100 against 16000): moved.
    assert first(15900.0, 2.0) == other.address


def test_costs_are_queue_plus_uncached_over_speed() -> None:
    a, b = _fleet(50, 50)
    b = b._replace(speed=0.5)
    terms = prompt_terms(
        tokens=300, cached={b.address: 200.0}, queued={a.address: 50.0}, move_cost=2.0
    )
    got = costs([a, b], terms=terms)
    # a: 50 queued + 300 uncached + the 200 b holds, redone; b: 100 uncached at half speed.
    assert got == {a.address: 550.0, b.address: 200.0}


def test_the_server_holding_more_of_the_prompt_wins() -> None:
    short, long, idle = _fleet(50, 50, 50)
    cached = {short.address: 500.0, long.address: 1500.0}
    # Both holders queue 400. Long: 400 + 500 uncached = 900; short: 400 + 1500 + the 1000
    # it redoes = 2900; idle: 2000 + 1500 = 3500.
    queued = {short.address: 400.0, long.address: 400.0}
    assert _sized([short, long, idle], tokens=2000, cached=cached, queued=queued) == long.address
    # The long holder's queue grows past what its longer hit saves: the short holder next.
    queued[long.address] = 3000.0
    assert _sized([short, long, idle], tokens=2000, cached=cached, queued=queued) == short.address
