"""The config the loop serves: a pool per InferencePool that ``inference_pools`` found (the
config's own pool winning a clash of names), each InferencePool pool's picker failing open or
closed as its object says; nothing changed, the same object."""

from __future__ import annotations

import pytest
import yaml

from xds_control.config import Config, parse_config
from xds_control.control.discovered import with_discovered_pools, with_failure_modes
from xds_control.discovery import FailureMode
from xds_control.errors import ConfigError


def _pool(name: str, *, picker: bool = True) -> dict[str, object]:
    pool: dict[str, object] = {"name": name, "inference_pool": {"namespace": "llm", "name": name}}
    if picker:
        pool["picker"] = {"address": "127.0.0.1:9002"}
    return pool


def _config() -> Config:
    pools = [_pool("llama"), _pool("qwen"), _pool("plain", picker=False)]
    routes = [
        {"name": name, "pool": name, "match": {"prefix": f"/{name}"}}
        for name in ("llama", "qwen", "plain")
    ]
    listener = {"name": "gw", "address": "127.0.0.1:10000", "routes": routes}
    return parse_config(text=yaml.safe_dump({"pools": pools, "listeners": [listener]}))


def test_an_inference_pool_pool_fails_open_or_closed_as_its_object_says() -> None:
    config = _config()
    modes: dict[str, FailureMode] = {"llama": "FailClose", "qwen": "FailOpen", "plain": "FailClose"}
    served = with_failure_modes(config, modes)
    fail_open = {p.name: p.picker.fail_open if p.picker else None for p in served.pools}
    assert fail_open == {"llama": False, "qwen": True, "plain": None}  # plain: no picker


def test_nothing_to_change_serves_the_config_itself() -> None:
    config = _config()
    assert with_failure_modes(config, {"qwen": "FailOpen"}) is config
    assert with_failure_modes(config, {}) is config


DISCOVERING = {
    "inference_pools": {
        "namespace": "llm",
        "weight": 7,
        "lb": {"policy": "least_request"},
        "picker": {"address": "127.0.0.1:9002"},
    },
    "pools": [{"name": "own", "endpoints": [{"address": "10.0.0.1:8000"}]}],
    "listeners": [
        {
            "name": "gw",
            "address": "127.0.0.1:10000",
            "routes": [
                {"name": "a", "pool": "llama", "match": {"prefix": "/llama"}},
                {"name": "b", "pools": [{"name": "llama", "weight": 70}, {"name": "qwen"}]},
            ],
        }
    ],
}


def _discovering() -> Config:
    return parse_config(text=yaml.safe_dump(DISCOVERING))


def test_routes_may_name_pools_the_config_lacks_only_with_inference_pools() -> None:
    assert [p.name for p in _discovering().pools] == ["own"]
    without = {key: value for key, value in DISCOVERING.items() if key != "inference_pools"}
    with pytest.raises(ConfigError) as caught:
        parse_config(text=yaml.safe_dump(without))
    assert ("listeners[0].routes[0].pool", "no pool named 'llama' (own)") in caught.value.problems


def test_a_config_needs_a_pool_or_inference_pools() -> None:
    data = {**DISCOVERING, "pools": []}
    assert parse_config(text=yaml.safe_dump(data)).pools == ()
    del data["inference_pools"]
    with pytest.raises(ConfigError, match="give at least one pool"):
        parse_config(text=yaml.safe_dump(data))


def test_each_inference_pool_becomes_a_pool_with_the_defaults_and_its_own_source() -> None:
    config, clashes = with_discovered_pools(_discovering(), ["llama", "own", "qwen"])
    assert clashes == ["own"]  # the config's pool wins
    assert [p.name for p in config.pools] == ["own", "llama", "qwen"]
    llama = config.pool("llama")
    assert llama.inference_pool is not None
    assert (llama.inference_pool.namespace, llama.inference_pool.name) == ("llm", "llama")
    assert llama.inference_pool.weight == 7
    assert llama.lb.policy == "least_request"
    assert llama.picker == config.inference_pools.picker  # type: ignore[union-attr]
    assert config.pool("own").inference_pool is None


def test_no_inference_pool_found_serves_the_config_itself() -> None:
    config = _discovering()
    assert with_discovered_pools(config, [])[0] is config
