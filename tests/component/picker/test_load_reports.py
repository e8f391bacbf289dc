"""The exchange with per-response load: the request asks, the report is read and stripped."""

from __future__ import annotations

import json

import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ext

from xds_control.config import parse_config
from xds_control.discovery import Endpoint
from xds_control.picker import Fleet, Picker
from xds_control.picker.exchange import Exchange
from xds_control.signals import LoadReport

ADDRESSES = ["10.0.0.1:8000", "10.0.0.2:8000"]


def _picker(*, on: bool, now: list[float]) -> Picker:
    pool = {
        "name": "chat",
        "endpoints": [{"address": a} for a in ADDRESSES],
        "picker": {"address": "127.0.0.1:9100", "per_response_load": on},
    }
    listener = {
        "name": "gw",
        "address": "127.0.0.1:10000",
        "routes": [{"name": "r", "pool": "chat"}],
    }
    config = parse_config(text=yaml.safe_dump({"pools": [pool], "listeners": [listener]}))
    endpoints = {
        "chat": tuple(
            Endpoint(address=a, host=a.split(":")[0], port=8000, weight=10) for a in ADDRESSES
        )
    }
    fleet = Fleet(config=lambda: config, endpoints=lambda: endpoints, decisions=dict)
    return Picker(fleet=fleet, clock=lambda: now[0])


def _body() -> ext.ProcessingRequest:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    return ext.ProcessingRequest(request_body=ext.HttpBody(body=body, end_of_stream=True))


def _response(served: str, report: str) -> ext.ProcessingRequest:
    message = ext.ProcessingRequest(response_headers=ext.HttpHeaders())
    message.response_headers.headers.headers.append(
        base_pb2.HeaderValue(key="endpoint-load-metrics", raw_value=report.encode())
    )
    lb = message.metadata_context.filter_metadata["envoy.lb"]
    lb.fields["x-gateway-destination-endpoint-served"].string_value = served
    return message


def test_on_the_request_asks_and_the_report_is_recorded_and_removed() -> None:
    now = [100.0]
    picker = _picker(on=True, now=now)
    exchange = Exchange(picker, pool="chat")
    [picked] = exchange.on(_body())
    headers = {
        o.header.key: o.header.raw_value
        for o in picked.request_body.response.header_mutation.set_headers
    }
    assert headers["endpoint-load-metrics-format"] == b"TEXT"
    served = headers["x-gateway-destination-endpoint"].decode().split(",")[0]
    report = "TEXT named_metrics.kv_cache_usage_perc=0.5, named_metrics.num_requests_waiting=7.0"
    [answer] = exchange.on(_response(served, report))
    assert list(answer.response_headers.response.header_mutation.remove_headers) == [
        "endpoint-load-metrics"
    ]
    assert picker.reported.last(served) == (LoadReport(waiting=7.0, kv_usage=0.5), 100.0)
    # The next pick reads that queue: the other server, idle, is chosen.
    [again] = Exchange(picker, pool="chat").on(_body())
    first = again.request_body.response.header_mutation.set_headers[0].header.raw_value
    assert first.decode().split(",")[0] != served


def test_off_nothing_is_asked_read_or_removed() -> None:
    picker = _picker(on=False, now=[100.0])
    exchange = Exchange(picker, pool="chat")
    [picked] = exchange.on(_body())
    keys = [o.header.key for o in picked.request_body.response.header_mutation.set_headers]
    assert keys == ["x-gateway-destination-endpoint"]
    [answer] = exchange.on(_response(ADDRESSES[0], "TEXT named_metrics.num_requests_waiting=7.0"))
    assert not answer.response_headers.HasField("response")
    assert picker.reported.last(ADDRESSES[0]) is None
