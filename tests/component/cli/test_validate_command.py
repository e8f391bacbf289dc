"""`xds-control validate` and `serve` refuse bad configs with the field path and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from configs import ONE_POOL
from xds_lab.harness.ports import free_port
from xds_lab.sim.tokenizer import write

BAD = {
    "missing pool": (ONE_POOL.replace("pool: chat", "pool: gpu"), "listeners[0].routes[0].pool"),
    "duplicate": (
        ONE_POOL.replace("listeners:", "  - {name: chat, endpoints: []}\nlisteners:"),
        "pools[1].name",
    ),
    "bad address": (ONE_POOL.replace("127.0.0.1:8001", "localhost:8001"), "endpoints[0].address"),
    "weight 0": (ONE_POOL.replace("weight: 10", "weight: 0"), "pools[0].endpoints[0].weight"),
    "empty file": ("", "the file is empty"),
    "not yaml": ("pools: [\n  {{{", "not valid YAML"),
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xds_control", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("case", sorted(BAD))
def test_validate_names_the_field_and_exits_2(case: str, tmp_path: Path) -> None:
    text, expected = BAD[case]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    result = run("validate", "--config", str(path))
    assert result.returncode == 2, result
    assert expected in result.stderr, result.stderr


def test_validate_accepts_a_good_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(ONE_POOL)
    result = run("validate", "--config", str(path))
    assert result.returncode == 0, result.stderr
    assert "valid: 1 pools, 1 listeners, 1 routes, 1 endpoints" in result.stdout


def test_validate_says_when_a_mix_of_engines_turned_the_data_path_on(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    mixed = ONE_POOL.replace(
        "endpoints: [{address: 127.0.0.1:8001, weight: 10}]",
        "endpoints: [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002, engine: triton}]",
    )
    for text, said in ((ONE_POOL, None), (mixed, "data path on (pool chat mixes triton, vllm)")):
        path.write_text(text)
        result = run("validate", "--config", str(path))
        assert result.returncode == 0, result.stderr
        if said is None:
            assert "data path" not in result.stdout, result.stdout
        else:
            assert said in result.stdout, result.stdout


def test_validate_checks_the_endpoints_file(tmp_path: Path) -> None:
    (tmp_path / "eps.yaml").write_text("endpoints:\n  - {address: 127.0.0.1:1, weight: 101}\n")
    path = tmp_path / "config.yaml"
    path.write_text(
        ONE_POOL.replace(
            "endpoints: [{address: 127.0.0.1:8001, weight: 10}]", "endpoints_file: eps.yaml"
        )
    )
    result = run("validate", "--config", str(path))
    assert result.returncode == 2
    assert "endpoints[0].weight" in result.stderr


def test_serve_refuses_a_bad_config_and_serves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(BAD["weight 0"][0])
    port = free_port()
    result = run("serve", "--config", str(path), "--xds-address", f"127.0.0.1:{port}")
    assert result.returncode == 2
    assert "pools[0].endpoints[0].weight" in result.stderr


def test_shipped_example_is_valid() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "config.yaml"
    result = run("validate", "--config", str(example))
    assert result.returncode == 0, result.stderr
    assert "valid: 2 pools, 1 listeners, 4 routes, 5 endpoints" in result.stdout


def test_validate_loads_the_pickers_tokenizer(tmp_path: Path) -> None:
    picker = "    picker: {address: '127.0.0.1:9002', tokenizer: model}\n    endpoints:"
    path = tmp_path / "config.yaml"
    path.write_text(ONE_POOL.replace("    endpoints:", picker))
    result = run("validate", "--config", str(path))  # no such directory beside the config
    assert result.returncode == 2, result
    assert "pools[0].picker.tokenizer" in result.stderr
    assert "tokenizer.json" in result.stderr
    write(tmp_path / "model")  # relative paths are read from the config's directory
    result = run("validate", "--config", str(path))
    assert result.returncode == 0, result.stderr
