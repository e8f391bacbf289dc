"""Left unset, the data path turns itself on where the config puts servers that time a decode
step (vLLM, SGLang) beside servers that time a whole request (Triton, ONNX Runtime): in one pool
or behind one route over pools. Set either way, it stays as set."""

from __future__ import annotations

import pytest

from xds_control.config import data_path_wanted, parse_config


def config(*, pools: str, routes: str, data_path: str = "") -> str:
    return f"""
pools:
{pools}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: {routes}
{data_path}
"""


ONE_VLLM = "  - {name: chat, engine: vllm, endpoints: [{address: 127.0.0.1:8001}]}"
ONE_TRITON = "  - {name: batch, engine: triton, endpoints: [{address: 127.0.0.1:8002}]}"
MIXED_POOL = (
    "  - name: chat\n    engine: vllm\n    endpoints:\n"
    "      - {address: 127.0.0.1:8001}\n      - {address: 127.0.0.1:8002, engine: onnxruntime}"
)


@pytest.mark.parametrize(
    ("pools", "routes", "why"),
    [
        (ONE_VLLM, "[{name: all, pool: chat}]", None),
        (ONE_TRITON, "[{name: all, pool: batch}]", None),
        (MIXED_POOL, "[{name: all, pool: chat}]", "pool chat mixes onnxruntime, vllm"),
        # Two families, each behind its own route: nothing compares them.
        (f"{ONE_VLLM}\n{ONE_TRITON}", "[{name: a, pool: chat}, {name: b, pool: batch}]", None),
        (
            f"{ONE_VLLM}\n{ONE_TRITON}",
            "[{name: split, pools: [{name: chat}, {name: batch}]}]",
            "route gateway/split spans triton, vllm",
        ),
    ],
)
def test_unset_it_is_on_exactly_where_two_kinds_of_step_time_meet(
    pools: str, routes: str, why: str | None
) -> None:
    loaded = parse_config(text=config(pools=pools, routes=routes))
    assert data_path_wanted(loaded) == why
    assert loaded.signals.data_path.on is (why is not None)
    assert loaded.signals.data_path.enabled is (why is not None)  # decided at load
    assert loaded.summary()["data_path"] is (why is not None)


@pytest.mark.parametrize("value", [True, False])
def test_set_it_stays_as_set(value: bool) -> None:
    data_path = f"signals: {{data_path: {{enabled: {str(value).lower()}}}}}"
    loaded = parse_config(
        text=config(pools=MIXED_POOL, routes="[{name: all, pool: chat}]", data_path=data_path)
    )
    assert loaded.signals.data_path.on is value
