"""A pool's ``engine`` is its servers' default; an endpoint entry may name its own, validated as
an engine with the field's path in the error, inline and in an endpoints file."""

from __future__ import annotations

import pytest

from xds_control.config import Engine, engine_of, parse_config
from xds_control.discovery import parse_endpoints_file, to_endpoints
from xds_control.errors import ConfigError, DiscoveryError

MIXED = """
pools:
  - name: chat
    engine: vllm
    endpoints:
      - {address: 127.0.0.1:8001}
      - {address: 127.0.0.1:8002, engine: triton}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: all, pool: chat}]
"""


def test_an_endpoint_entry_overrides_the_pools_engine() -> None:
    config = parse_config(text=MIXED)
    pool = config.pool("chat")
    assert [e.engine for e in pool.endpoints] == [None, Engine.TRITON]
    endpoints = to_endpoints(pool.endpoints)
    assert [engine_of(pool, e) for e in endpoints] == [Engine.VLLM, Engine.TRITON]


def test_an_unknown_engine_on_an_entry_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text=MIXED.replace("engine: triton", "engine: tgi"), source="test.yaml")
    (path, problem), *_ = info.value.problems
    assert path == "pools[0].endpoints[1].engine"
    assert "triton" in problem  # the known values are named


def test_an_endpoints_file_entry_names_its_engine() -> None:
    text = (
        "endpoints:\n  - {address: 127.0.0.1:8001, engine: sglang}\n  - {address: 127.0.0.1:8002}\n"
    )
    first, second = parse_endpoints_file(text=text, source="eps.yaml")
    assert (first.engine, second.engine) == (Engine.SGLANG, None)
    with pytest.raises(DiscoveryError, match=r"endpoints\[0\]\.engine"):
        parse_endpoints_file(text=text.replace("sglang", "nope"), source="eps.yaml")
