"""The picker end to end without gRPC: its answer to Envoy's messages, the index keeping a
prefix where it went when weights move, and no pick whenever there is nothing to pick on."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import pytest
import structlog
import structlog.testing
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2 as ext_proc_mode
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext
from google.protobuf import struct_pb2
from prometheus_client import REGISTRY

from xds_control.config import Config, parse_config
from xds_control.config.flow import FlowControl
from xds_control.discovery import Endpoint
from xds_control.flow import Band, FlowController
from xds_control.picker import Fleet, Picker
from xds_control.picker.exchange import Exchange


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
    [headers] = Exchange(picker, pool="chat").on(
        ext.ProcessingRequest(request_headers=ext.HttpHeaders())
    )
    assert headers.WhichOneof("response") == "request_headers"
    assert not headers.request_headers.response.HasField("header_mutation")

    [response] = Exchange(picker, pool="chat").on(_body_message(_body("be brief")))
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
        [response] = Exchange(picker, pool=pool).on(_body_message(body))
        assert response.WhichOneof("response") == "request_body"
        assert not response.request_body.response.HasField("header_mutation"), pool
        assert not response.HasField("dynamic_metadata")
    state.config = _config(None)
    assert picker.pick(pool="chat", body=_body("be brief")).addresses == ()


def test_a_failing_pick_is_no_pick() -> None:
    def broken() -> Config:
        raise RuntimeError("boom")

    picker = Picker(fleet=Fleet(config=broken, endpoints=dict, decisions=dict))
    errors = _picks("error")
    [response] = Exchange(picker, pool="chat").on(_body_message(_body("be brief")))
    assert _picks("error") == errors + 1
    assert response.WhichOneof("response") == "request_body"
    assert not response.request_body.response.HasField("header_mutation")


def test_a_prefix_stays_where_it_went_when_weights_move() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "affinity": 4}), [10, 10, 10])
    picker = state.picker()
    prompts = [f"system prompt {i}: " + "be helpful " * 40 for i in range(30)]
    first = {p: picker.pick(pool="chat", body=_body(p)).addresses[0] for p in prompts}
    state.reweigh([30, 30, 30])  # same split, new tuples: a fresh engine cycle
    holder = first[prompts[0]]
    weights = [40 if a == holder else 10 for a in ADDRESSES]
    state.reweigh(weights)
    # Rendezvous alone would move some prompts to the heavier holder; the index keeps each
    # where its prefix is cached (10 x 4 >= 40).
    held = _picks("held")
    assert {p: picker.pick(pool="chat", body=_body(p)).addresses[0] for p in prompts} == first
    assert _picks("held") == held + len(prompts)


def test_requests_in_flight_queue_on_their_server_until_they_end() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100"}), [10, 10, 10]).picker()
    picker.clock = lambda: 1000.0

    def body(n: int) -> bytes:
        return json.dumps({"prompt": f"question {n}: " + "x " * 400}).encode()

    # No shared prefix, equal servers: each new request goes where least is queued.
    first = [picker.pick(pool="chat", body=body(n), request=n).addresses[0] for n in range(3)]
    assert sorted(first) == sorted(ADDRESSES)
    for n in (1, 2):
        picker.end(pool="chat", request=n)
    # Request 0 still runs: a new prompt goes elsewhere, past its 203 queued tokens.
    assert picker.pick(pool="chat", body=body(3), request=3).addresses[0] != first[0]
    picker.end(pool="chat", request=3)
    # Its own prompt again goes back: the 192 of 203 tokens cached there (all but the last
    # partial block) would be prefilled again anywhere else, worth more than its queue.
    assert picker.pick(pool="chat", body=body(0), request=4).addresses[0] == first[0]


def test_the_debug_log_explains_a_pick_with_what_the_ranking_credited() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "affinity": 2}), [10, 10, 10])
    picker = state.picker()
    body = _body("a long system prompt " * 40)
    holder = picker.pick(pool="chat", body=body).addresses[0]
    # The holder's weight x affinity (10 x 2) falls below the best (40): its cache is not
    # credited, and the explanation says so instead of showing the index's raw match.
    state.reweigh([10 if a == holder else 40 for a in ADDRESSES])
    before = structlog.get_config()
    try:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        with structlog.testing.capture_logs() as logs:
            chosen = picker.pick(pool="chat", body=body).addresses
    finally:
        structlog.configure(**before)
    [pick] = [e for e in logs if e["event"] == "pick"]
    assert chosen[0] != holder
    assert pick["cached"] == {}
    assert pick["chosen"] == list(chosen)
    assert set(pick["cost"]) == set(ADDRESSES)


def _hint(addresses: list[str]) -> base_pb2.Metadata:
    """The gateway's subset hint, as a GIE gateway sets it in ``metadata_context``."""
    hint = struct_pb2.Struct()
    hint.fields["x-gateway-destination-endpoint-subset"].list_value.extend(addresses)
    return base_pb2.Metadata(filter_metadata={"envoy.lb.subset_hint": hint})


def _named(response: ext.ProcessingResponse) -> list[str]:
    [option] = response.request_body.response.header_mutation.set_headers
    return str(option.header.raw_value.decode()).split(",")


def _headers(metadata: base_pb2.Metadata | None = None) -> ext.ProcessingRequest:
    message = ext.ProcessingRequest(request_headers=ext.HttpHeaders())
    if metadata is not None:
        message.metadata_context.CopyFrom(metadata)
    return message


def test_a_gateway_stream_names_only_servers_of_its_subset_hint() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100", "fallbacks": 2}), [10, 10, 10]).picker()
    for subset in ([ADDRESSES[2]], ADDRESSES[:2]):
        exchange = Exchange(picker, pool="chat", gateway=True)
        exchange.on(_headers(_hint(subset)))
        [response] = exchange.on(_body_message(_body("be brief")))
        assert set(_named(response)) == set(subset)


def test_a_gateway_is_told_503_when_there_is_no_server_to_name() -> None:
    state = _State(_config({"address": "127.0.0.1:9100"}), [10, 10, 10])
    picker = state.picker()
    cases = {
        "empty subset": ("chat", _hint([])),
        "subset of strangers": ("chat", _hint(["10.9.9.9:8000"])),
        "no pool at the address": ("", None),
    }
    for case, (pool, metadata) in cases.items():
        exchange = Exchange(picker, pool=pool, gateway=True)
        exchange.on(_headers(metadata))
        [response] = exchange.on(_body_message(_body("be brief")))
        assert response.WhichOneof("response") == "immediate_response", case
        assert response.immediate_response.status.code == 503, case
    # Envoy as xds-control configures it fails open instead: no answer, MAGLEV decides.
    ours = Exchange(picker, pool="chat")
    ours.on(_headers(_hint([])))
    [response] = ours.on(_body_message(_body("be brief")))
    assert response.WhichOneof("response") == "request_body"
    assert not response.request_body.response.HasField("header_mutation")


def _response_headers(served: str) -> ext.ProcessingRequest:
    """The response headers' message naming ``served`` as the protocol does (``envoy.lb``)."""
    message = ext.ProcessingRequest(response_headers=ext.HttpHeaders())
    lb = message.metadata_context.filter_metadata["envoy.lb"]
    lb.fields["x-gateway-destination-endpoint-served"].string_value = served
    return message


def _served(where: str) -> float:
    labels = {"pool": "chat", "where": where}
    return REGISTRY.get_sample_value("xds_control_picker_served_total", labels) or 0.0


LONG = "You are a careful assistant; answer in full sentences. " * 8
"""A system prompt of several of the index's blocks."""


@pytest.mark.parametrize("by", ["gateway", "ours"])
def test_the_served_endpoint_ends_the_prefill_and_holds_the_prompt(by: str) -> None:
    picker = _State(_config({"address": "127.0.0.1:9100", "fallbacks": 2}), [10, 10, 10]).picker()
    exchange = Exchange(picker, pool="chat", gateway=by == "gateway")
    exchange.on(_headers())
    [picked] = exchange.on(_body_message(_body(LONG)))
    first, _, third = _named(picked)
    assert set(picker.open_tokens("chat")) == {first}
    elsewhere = _served("elsewhere")

    [answer] = exchange.on(_response_headers(third))  # Envoy went down the list

    assert answer.WhichOneof("response") == "response_headers"
    assert not answer.response_headers.HasField("response")  # the response passes unchanged
    assert picker.open_tokens("chat") == {}  # the first byte: its prefill is over
    assert _served("elsewhere") == elsewhere + 1
    exchange.end()
    # The prompt is where it served: a request for it that may not go to the first pick
    # (the gateway's subset hint) finds it held there.
    held = _picks("held")
    again = Exchange(picker, pool="chat", gateway=True)
    again.on(_headers(_hint([a for a in ADDRESSES if a != first])))
    [repeat] = again.on(_body_message(_body(LONG)))
    assert _named(repeat)[0] == third
    assert _picks("held") == held + 1


def test_a_request_served_where_picked_counts_as_picked() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100"}), [10, 10, 10]).picker()
    exchange = Exchange(picker, pool="chat")
    [picked] = exchange.on(_body_message(_body("be brief")))
    before = _served("picked")
    exchange.on(_response_headers("-"))  # Envoy's word for no upstream: nothing reported
    assert _served("picked") == before
    assert set(picker.open_tokens("chat")) == {_named(picked)[0]}
    exchange.on(_response_headers(_named(picked)[0]))
    assert _served("picked") == before + 1
    assert picker.open_tokens("chat") == {}


def _duplex(message: ext.ProcessingRequest) -> ext.ProcessingRequest:
    """``message`` as the first of a stream whose body comes FULL_DUPLEX_STREAMED."""
    message.protocol_config.request_body_mode = ext_proc_mode.ProcessingMode.FULL_DUPLEX_STREAMED
    return message


def test_a_streamed_body_is_picked_once_whole_and_given_back() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100", "fallbacks": 1}), [10, 10, 10]).picker()
    body = _body("be brief")
    exchange = Exchange(picker, pool="chat", gateway=True)
    assert exchange.on(_duplex(_headers())) == []  # held until the body is whole
    pieces = [body[:7], body[7:20], body[20:]]
    for piece in pieces[:-1]:
        chunk = ext.ProcessingRequest(request_body=ext.HttpBody(body=piece))
        assert exchange.on(chunk) == []
    last = ext.ProcessingRequest(request_body=ext.HttpBody(body=pieces[-1], end_of_stream=True))
    headers, returned = exchange.on(last)
    assert headers.WhichOneof("response") == "request_headers"
    [option] = headers.request_headers.response.header_mutation.set_headers
    named = option.header.raw_value.decode().split(",")
    assert len(named) == 2
    assert set(named) <= set(ADDRESSES)
    lb = headers.dynamic_metadata.fields["envoy.lb"].struct_value
    assert lb.fields["x-gateway-destination-endpoint"].string_value == ",".join(named)
    streamed = returned.request_body.response.body_mutation.streamed_response
    assert (streamed.body, streamed.end_of_stream) == (body, True)


def test_a_streamed_body_that_trailers_end_is_given_back_before_them() -> None:
    picker = _State(_config({"address": "127.0.0.1:9100"}), [10, 10, 10]).picker()
    body = _body("be brief")
    exchange = Exchange(picker, pool="chat")
    exchange.on(_duplex(_headers()))
    assert exchange.on(ext.ProcessingRequest(request_body=ext.HttpBody(body=body))) == []
    trailers = ext.ProcessingRequest(request_trailers=ext.HttpTrailers())
    kinds = [r.WhichOneof("response") for r in exchange.on(trailers)]
    assert kinds == ["request_headers", "request_body", "request_trailers"]


def test_flow_control_counts_only_servers_every_envoy_has_taken() -> None:
    state = _State(_config({"address": "127.0.0.1:9100", "flow": {}}), [10, 10, 10])
    fleet = Fleet(config=lambda: state.config, endpoints=lambda: state.endpoints, decisions=dict)
    delivered: frozenset[str] | None = frozenset()
    picker = Picker(fleet=fleet, delivered=lambda pool: delivered)
    # Three healthy servers, none ACKed by the Envoy asking (scale from zero, EDS on its way):
    # nothing to dispatch to yet.
    assert picker.saturated("chat")
    delivered = frozenset({ADDRESSES[1]})
    assert not picker.saturated("chat")
    delivered = None  # no Envoy asks for the pool: the control plane's view decides
    assert not picker.saturated("chat")


class _Pools:
    """Flow control's look at the pool: its settings, saturated or not, always ready."""

    def __init__(self, flow: FlowControl, *, saturated: bool) -> None:
        self.flow = flow
        self.is_saturated = saturated

    def flow_control(self, pool: str) -> FlowControl | None:
        return self.flow

    def saturated(self, pool: str) -> bool:
        return self.is_saturated

    def ready(self, pool: str) -> bool:
        return True


def _with_header(name: str, value: str) -> ext.ProcessingRequest:
    message = ext.ProcessingRequest(request_headers=ext.HttpHeaders())
    message.request_headers.headers.headers.append(
        base_pb2.HeaderValue(key=name, raw_value=value.encode())
    )
    return message


@pytest.mark.parametrize(
    ("header", "route", "held_ms"),
    [
        ("critical", Band.HIGH, 4000),  # the header first
        ("", Band.HIGH, 3000),  # else the route's class
        ("urgent", Band.HIGH, 3000),  # a value that names no band is none
        ("", Band.MEDIUM, 11000),  # a route without a class: medium
    ],
)
def test_a_request_s_band_is_its_header_s_else_its_route_s(
    header: str, route: Band, held_ms: int
) -> None:
    flow = {"max_wait_s": 10, "band_max_wait_s": {"critical": 3, "high": 2}}
    state = _State(_config({"address": "127.0.0.1:9100", "flow": flow}), [10, 10, 10])
    picker = state.picker()
    controller = FlowController(pools=_Pools(FlowControl.model_validate(flow), saturated=True))
    exchange = Exchange(picker, pool="chat", flow=controller, band=route)
    exchange.on(_with_header("x-priority", header) if header else _headers())
    # Saturated: the body is held, and Envoy told to wait as long as its band may.
    [held] = exchange.on(_body_message(_body("be brief")))
    assert exchange.holding
    assert held.override_message_timeout.ToMilliseconds() == held_ms


def _both_duplex(message: ext.ProcessingRequest) -> ext.ProcessingRequest:
    """``message`` as the first of a stream whose request and response bodies both come
    FULL_DUPLEX_STREAMED (Istio's and GKE's gateways)."""
    mode = ext_proc_mode.ProcessingMode.FULL_DUPLEX_STREAMED
    message.protocol_config.request_body_mode = mode
    message.protocol_config.response_body_mode = mode
    return message


STREAMED_ANSWER = [
    b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n',
    b'data: {"choices":[],"usage":{"completion',
    b'_tokens":7}}\n\ndata: [DONE]\n\n',
]
JSON_ANSWER = [b'{"choices":[{"message":{"content":"hi"}}],', b'"usage":{"completion_tokens":7}}']


@pytest.mark.parametrize("budgeted", [True, False])
@pytest.mark.parametrize(
    ("pieces", "trailers"), [(STREAMED_ANSWER, False), (JSON_ANSWER, True)], ids=["sse", "json"]
)
def test_a_full_duplex_response_is_given_back_as_it_came_and_its_usage_settles_the_charge(
    budgeted: bool, pieces: list[bytes], trailers: bool
) -> None:
    flow = {"budgets": [{"tenant": "a" if budgeted else "other", "output_tokens": 1000}]}
    state = _State(_config({"address": "127.0.0.1:9100", "flow": flow}), [10, 10, 10])
    controller = FlowController(
        pools=_Pools(FlowControl.model_validate(flow), saturated=False), clock=lambda: 0.0
    )

    def charged() -> dict[object, object]:
        return {row["tenant"]: row["charged"] for row in controller.budgets.rows()}

    exchange = Exchange(state.picker(), pool="chat", gateway=True, flow=controller)
    exchange.on(_both_duplex(_with_header("x-gateway-inference-fairness-id", "a")))
    exchange.on(
        ext.ProcessingRequest(request_body=ext.HttpBody(body=_body("hi"), end_of_stream=True))
    )
    assert charged() == ({"a": 256} if budgeted else {})  # the default estimate

    # Full duplex already sends the body: no mode to ask for (the gateway allows none).
    [answer] = exchange.on(_response_headers(ADDRESSES[0]))
    assert answer.WhichOneof("response") == "response_headers"
    assert not answer.HasField("mode_override")
    # Envoy passes on only what comes back: each piece, as it came, at once.
    for n, piece in enumerate(pieces):
        end = not trailers and n == len(pieces) - 1
        message = ext.ProcessingRequest(response_body=ext.HttpBody(body=piece, end_of_stream=end))
        [back] = exchange.on(message)
        streamed = back.response_body.response.body_mutation.streamed_response
        assert (streamed.body, streamed.end_of_stream) == (piece, end)
    if trailers:  # a body with trailers ends with them, not with end_of_stream
        [back] = exchange.on(ext.ProcessingRequest(response_trailers=ext.HttpTrailers()))
        assert back.WhichOneof("response") == "response_trailers"
    # Settled by what the usage said, before the stream closes.
    assert charged() == ({"a": 7} if budgeted else {})
