"""The picker end to end without gRPC: its answer to Envoy's messages, the index keeping a
prefix where it went when weights move, and no pick whenever there is nothing to pick on."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import structlog
import structlog.testing
import yaml
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from prometheus_client import REGISTRY

from xds_control.config import Config, parse_config
from xds_control.discovery import Endpoint
from xds_control.picker import Fleet, Picker
from xds_control.picker.service import answer


def _picks(outcome: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "xds_control_picker_picks_total", {"pool": "chat", "outcome": outcome}
        )
        or 0.0
    )


ADDRESSES = ["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]


def _config(picker: Mapping[str, object] | None) -> Config:
    pool: dict[str, object] = {
        "name": "chat",
        "endpoints": [{"address": a} for a in ADDRESSES],
    }
    if picker is not None:
        pool["picker"] = dict(picker)
    listener = {
        "name": "gw",
        "address": "127.0.0.1:10000",
        "routes": [{"name": "r", "pool": "chat"}],
    }
    return parse_config(text=yaml.safe_dump({"pools": [pool], "listeners": [listener]}))


class _State:
    def __init__(self, config: Config, weights: list[int]) -> None:
        self.config = config
        self.endpoints = self._endpoints(weights)

    def _endpoints(self, weights: list[int]) -> dict[str, tuple[Endpoint, ...]]:
        return {
            "chat": tuple(
                Endpoint(address=a, host=a.split(":")[0], port=8000, weight=w)
                for a, w in zip(ADDRESSES, weights, strict=True)
            )
        }

    def reweigh(self, weights: list[int]) -> None:
        self.endpoints = self._endpoints(weights)

    def picker(self) -> Picker:
        fleet = Fleet(config=lambda: self.config, endpoints=lambda: self.endpoints, decisions=dict)
        return Picker(fleet=fleet)


def _body(system: str) -> bytes:
    return json.dumps({"messages": [{"role": "system", "content": system}]}).encode()


def _body_message(body: bytes) -> ext.ProcessingRequest:
    return ext.ProcessingRequest(request_body=ext.HttpBody(body=body, end_of_stream=True))


def test_answer_names_the_servers_in_header_and_metadata() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100", "fallbacks": 1}), [10, 10, 10]).picker()
    headers = answer(
        picker, pool="chat", request=ext.ProcessingRequest(request_headers=ext.HttpHeaders())
    )
    assert headers.WhichOneof("response") == "request_headers"
    assert not headers.request_headers.response.HasField("header_mutation")

    response = answer(picker, pool="chat", request=_body_message(_body("be brief")))
    [option] = response.request_body.response.header_mutation.set_headers
    assert option.header.key == "x-gateway-destination-endpoint"
    named = option.header.raw_value.decode().split(",")
    assert len(set(named)) == 2
    assert set(named) <= set(ADDRESSES)
    lb = response.dynamic_metadata.fields["envoy.lb"].struct_value
    assert lb.fields["x-gateway-destination-endpoint"].string_value == ",".join(named)


def test_no_pick_when_there_is_nothing_to_pick_on() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "max_body_bytes": 100}), [10, 10, 10])
    picker = state.picker()
    for pool, body in [
        ("chat", b"{not json"),
        ("chat", _body("x" * 200)),  # over max_body_bytes
        ("other", _body("be brief")),  # not a picker pool
        ("", _body("be brief")),  # no pool in the stream's metadata
    ]:
        response = answer(picker, pool=pool, request=_body_message(body))
        assert response.WhichOneof("response") == "request_body"
        assert not response.request_body.response.HasField("header_mutation"), pool
        assert not response.HasField("dynamic_metadata")
    state.config = _config(None)
    assert picker.pick(pool="chat", body=_body("be brief")) == []


def test_a_failing_pick_is_no_pick() -> None:
    def broken() -> Config:
        raise RuntimeError("boom")

    picker = Picker(fleet=Fleet(config=broken, endpoints=dict, decisions=dict))
    errors = _picks("error")
    response = answer(picker, pool="chat", request=_body_message(_body("be brief")))
    assert _picks("error") == errors + 1
    assert response.WhichOneof("response") == "request_body"
    assert not response.request_body.response.HasField("header_mutation")


def test_a_prefix_stays_where_it_went_when_weights_move() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "affinity": 4}), [10, 10, 10])
    picker = state.picker()
    prompts = [f"system prompt {i}: " + "be helpful " * 40 for i in range(30)]
    first = {p: picker.pick(pool="chat", body=_body(p))[0] for p in prompts}
    state.reweigh([30, 30, 30])  # same split, new tuples: a fresh engine cycle
    holder = first[prompts[0]]
    weights = [40 if a == holder else 10 for a in ADDRESSES]
    state.reweigh(weights)
    # Rendezvous alone would move some prompts to the heavier holder; the index keeps each
    # where its prefix is cached (10 x 4 >= 40).
    held = _picks("held")
    assert {p: picker.pick(pool="chat", body=_body(p))[0] for p in prompts} == first
    assert _picks("held") == held + len(prompts)


def test_requests_in_flight_queue_on_their_server_until_they_end() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100"}), [10, 10, 10]).picker()
    picker.clock = lambda: 1000.0

    def body(n: int) -> bytes:
        return json.dumps({"prompt": f"question {n}: " + "x " * 400}).encode()

    # No shared prefix, equal servers: each new request goes where least is queued.
    first = [picker.pick(pool="chat", body=body(n), request=n)[0] for n in range(3)]
    assert sorted(first) == sorted(ADDRESSES)
    for n in (1, 2):
        picker.end(pool="chat", request=n)
    # Request 0 still runs: a new prompt goes elsewhere, past its 203 queued tokens.
    assert picker.pick(pool="chat", body=body(3), request=3)[0] != first[0]
    picker.end(pool="chat", request=3)
    # Its own prompt again goes back: the 192 of 203 tokens cached there (all but the last
    # partial block) would be prefilled again anywhere else, worth more than its queue.
    assert picker.pick(pool="chat", body=body(0), request=4)[0] == first[0]


def test_the_debug_log_explains_a_pick_with_what_the_ranking_credited() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "affinity": 2}), [10, 10, 10])
    picker = state.picker()
    body = _body("a long system prompt " * 40)
    holder = picker.pick(pool="chat", body=body)[0]
    # The holder's weight x affinity (10 x 2) falls below the best (40): its cache is not
    # credited, and the explanation says so instead of showing the index's raw match.
    state.reweigh([10 if a == holder else 40 for a in ADDRESSES])
    before = structlog.get_config()
    try:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        with structlog.testing.capture_logs() as logs:
            chosen = picker.pick(pool="chat", body=body)
    finally:
        structlog.configure(**before)
    [pick] = [e for e in logs if e["event"] == "pick"]
    assert chosen[0] != holder
    assert pick["cached"] == {}
    assert pick["chosen"] == chosen
    assert set(pick["cost"]) == set(ADDRESSES)
