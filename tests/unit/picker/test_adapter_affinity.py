"""The adapter-affinity term: a request for a LoRA adapter goes where the adapter runs, then
where a slot is free, and a server whose slots are full comes last; a request for the base
model is ranked as without it."""

from __future__ import annotations

import json

import yaml

from xds_control.config import parse_config
from xds_control.discovery import Endpoint
from xds_control.picker import Fleet, Picker
from xds_control.picker.score import Candidate, adapter_term, rank
from xds_control.signals.sample import Adapters

RUNS, ROOM, WAITS, FULL, UNKNOWN = (f"10.0.0.{i}:8000" for i in range(1, 6))


def _adapters(running: set[str], waiting: set[str] = set()) -> Adapters:  # noqa: B006
    return Adapters(
        running=frozenset(running), waiting=frozenset(waiting), max_lora=2, observed_at=0.0
    )


SERVERS = (
    Candidate(address=RUNS, weight=50, healthy=True, adapters=_adapters({"a", "b"})),
    Candidate(address=ROOM, weight=50, healthy=True, adapters=_adapters({"b"})),
    Candidate(address=WAITS, weight=50, healthy=True, adapters=_adapters({"b", "c"}, {"a"})),
    Candidate(address=FULL, weight=50, healthy=True, adapters=_adapters({"b", "c"})),
    Candidate(address=UNKNOWN, weight=50, healthy=True),
)


def test_the_term_orders_running_room_waiting_full() -> None:
    term = adapter_term(adapter="a", load=512.0, full=16384.0)
    assert [term(c) for c in SERVERS] == [0.0, 512.0, 8192.0, 16384.0, 512.0]


def test_a_short_queue_where_the_adapter_must_load_beats_a_long_one_where_it_runs() -> None:
    terms = {"adapter": adapter_term(adapter="a", load=512.0, full=16384.0)}
    queued = {RUNS: 2000.0, ROOM: 0.0}
    ranking = rank(
        SERVERS[:2], key=b"k", affinity=4.0, move_cost=16.0, count=2, queued=queued, terms=terms
    )
    assert ranking.order == [ROOM, RUNS]


def _picker(lora: dict[str, object] | None) -> Picker:
    pool: dict[str, object] = {
        "name": "chat",
        "endpoints": [{"address": c.address} for c in SERVERS],
        "picker": {"address": "127.0.0.1:9002", **({"lora": lora} if lora else {})},
    }
    listener = {
        "name": "gw",
        "address": "127.0.0.1:10000",
        "routes": [{"name": "r", "pool": "chat"}],
    }
    config = parse_config(text=yaml.safe_dump({"pools": [pool], "listeners": [listener]}))
    endpoints = {
        "chat": tuple(
            Endpoint(address=c.address, host=c.address.split(":")[0], port=8000, weight=50)
            for c in SERVERS
        )
    }
    fleet = Fleet(config=lambda: config, endpoints=lambda: endpoints, decisions=dict)
    fleet.candidates = lambda pool: SERVERS  # type: ignore[method-assign]
    return Picker(fleet=fleet, clock=lambda: 100.0)


def _body(model: str, n: int) -> bytes:
    return json.dumps({"model": model, "prompt": f"request {n} " * 40}).encode()


def test_requests_for_an_adapter_go_where_it_runs_and_avoid_full_servers() -> None:
    picker = _picker({"names": ["a", "b", "c"]})
    firsts = [picker.pick(pool="chat", body=_body("a", n)).addresses[0] for n in range(20)]
    # Where it runs until the prompts queued there (about 100 tokens each) outweigh a load;
    # then where a slot is free; never where the slots are full.
    assert firsts[:4] == [RUNS] * 4
    assert set(firsts) <= {RUNS, ROOM, UNKNOWN}
    assert firsts.count(RUNS) > firsts.count(ROOM)


def test_the_base_model_and_unknown_adapters_are_ranked_as_without_lora() -> None:
    with_lora, without = _picker({"names": ["a"]}), _picker(None)
    for n in range(20):
        for model in ("meta-llama/Llama-3.1-8B-Instruct", "not-an-adapter"):
            body = _body(model, n)
            assert with_lora.pick(pool="chat", body=body) == without.pick(pool="chat", body=body)
