"""Inline endpoints and the endpoints-file format: what an operator writes, what the pools get."""

from __future__ import annotations

import pytest

from xds_control.config import parse_config
from xds_control.discovery import Endpoint, StaticSource, parse_endpoints_file
from xds_control.errors import DiscoveryError

CONFIG = parse_config(
    text="""
pools:
  - name: chat
    endpoints:
      - {address: 10.0.0.1:8000, weight: 30, batch_slots: 64}
      - {address: "[fd00::2]:8001"}
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: all, pool: chat}]}]
"""
)


async def test_static_source_serves_the_inline_endpoints() -> None:
    source = StaticSource(CONFIG.pools[0].endpoints)
    endpoints = await source.fetch()
    assert endpoints == (
        Endpoint(address="10.0.0.1:8000", host="10.0.0.1", port=8000, weight=30, batch_slots=64),
        Endpoint(address="[fd00::2]:8001", host="fd00::2", port=8001, weight=10),
    )
    assert await source.fetch() == endpoints


async def test_static_source_of_an_empty_pool_is_empty() -> None:
    assert await StaticSource(()).fetch() == ()


def test_an_endpoints_file_parses_in_order() -> None:
    text = "endpoints:\n  - {address: 10.0.0.2:8000, weight: 5}\n  - {address: 10.0.0.1:8000}\n"
    endpoints = parse_endpoints_file(text=text, source="eps.yaml")
    assert [(e.address, e.weight) for e in endpoints] == [
        ("10.0.0.2:8000", 5),
        ("10.0.0.1:8000", 10),
    ]


def test_an_empty_list_is_a_valid_empty_pool() -> None:
    assert parse_endpoints_file(text="endpoints: []\n", source="eps.yaml") == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("endpoints:\n  - {address: 10.0.0.1:8000, weight: 0}\n", "endpoints[0].weight"),
        ("endpoints:\n  - {address: localhost:8000}\n", "endpoints[0].address"),
        (
            "endpoints:\n  - {address: 10.0.0.1:8000, wieght: 5}\n",
            "endpoints[0].wieght: unknown field",
        ),
        ("endpoint: []\n", "endpoint: unknown field"),
        ("", "endpoints: Field required"),
        ("endpoints: [\n  {{{", "not valid YAML"),
    ],
    ids=["weight-0", "hostname", "misspelt-field", "misspelt-key", "empty", "not-yaml"],
)
def test_a_bad_file_names_the_file_and_the_field(text: str, expected: str) -> None:
    with pytest.raises(DiscoveryError) as caught:
        parse_endpoints_file(text=text, source="/etc/xds/eps.yaml")
    message = str(caught.value)
    assert message.startswith("/etc/xds/eps.yaml: ")
    assert expected in message
