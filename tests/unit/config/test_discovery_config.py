"""Pool discovery settings: kubernetes, inference_pool and dns validate with errors that name
the field, and a pool has one endpoint source."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xds_control.config import Config
from xds_control.config import parse_config as parse_text
from xds_control.config.discovery import parse_host_name_port
from xds_control.errors import ConfigError


def config(**pool: Any) -> dict[str, Any]:
    return {
        "pools": [{"name": "chat", **pool}],
        "listeners": [
            {"name": "gw", "address": "127.0.0.1:10000", "routes": [{"name": "r", "pool": "chat"}]}
        ],
    }


def parse_config(data: dict[str, Any]) -> Config:
    return parse_text(text=json.dumps(data), source="test")


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return list(info.value.problems)


def test_kubernetes_and_dns_pools_are_accepted() -> None:
    parsed = parse_config(
        config(kubernetes={"namespace": "llm", "service": "vllm", "port": "http"})
    )
    assert parsed.pools[0].kubernetes is not None
    assert parsed.pools[0].kubernetes.watch_timeout_s == 300
    parsed = parse_config(config(dns={"hosts": ["vllm-0.internal:8000", "[::1]:8000"]}))
    assert parsed.pools[0].dns is not None


def test_an_inference_pool_pool_is_accepted_with_the_kubernetes_defaults() -> None:
    parsed = parse_config(config(inference_pool={"namespace": "llm", "name": "llama.v1"}))
    found = parsed.pools[0].inference_pool
    assert found is not None
    assert (found.weight, found.watch_timeout_s, found.relist_backoff_s) == (10, 300, 1.0)
    assert (found.kubeconfig, found.context) == (None, None)


@pytest.mark.parametrize(
    ("pool", "field"),
    [
        ({"kubernetes": {"namespace": "LLM", "service": "vllm"}}, "pools[0].kubernetes.namespace"),
        ({"kubernetes": {"namespace": "llm"}}, "pools[0].kubernetes.service"),
        (
            {"kubernetes": {"namespace": "llm", "service": "v", "watch_timeout_s": 0}},
            "pools[0].kubernetes.watch_timeout_s",
        ),
        ({"inference_pool": {"namespace": "llm"}}, "pools[0].inference_pool.name"),
        (
            {"inference_pool": {"namespace": "llm", "name": "Llama"}},
            "pools[0].inference_pool.name",
        ),
        (
            {"inference_pool": {"namespace": "llm", "name": "l", "weight": 0}},
            "pools[0].inference_pool.weight",
        ),
        ({"dns": {"hosts": []}}, "pools[0].dns.hosts"),
        ({"dns": {"hosts": ["vllm-0.internal"]}}, "pools[0].dns.hosts[0]"),
        ({"dns": {"hosts": ["bad_name!:80"]}}, "pools[0].dns.hosts[0]"),
        ({"dns": {"hosts": ["a:80"], "refresh_s": 0}}, "pools[0].dns.refresh_s"),
    ],
)
def test_bad_values_name_the_field(pool: dict[str, Any], field: str) -> None:
    assert field in [path for path, _ in problems(config(**pool))]


def test_a_pool_has_one_endpoint_source() -> None:
    found = problems(
        config(
            endpoints=[{"address": "10.0.0.1:80"}],
            kubernetes={"namespace": "llm", "service": "vllm"},
        )
    )
    assert any("endpoints and kubernetes" in message for _, message in found)
    found = problems(
        config(
            kubernetes={"namespace": "llm", "service": "vllm"},
            inference_pool={"namespace": "llm", "name": "llama"},
        )
    )
    assert any("kubernetes and inference_pool" in message for _, message in found)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("vllm-0.internal:8000", ("vllm-0.internal", 8000)), ("[fd00::1]:80", ("fd00::1", 80))],
)
def test_host_name_port_parses(text: str, parsed: tuple[str, int]) -> None:
    assert parse_host_name_port(text) == parsed


@pytest.mark.parametrize("text", ["x:0", "x:70000", ":80", "a..b:80", "-a:80", "[zz]:80"])
def test_host_name_port_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_host_name_port(text)
