"""The config loader on hostile files: arbitrary bytes, broken encodings, YAML alias bombs,
deep nesting, a huge file. The only outcomes allowed are a valid ``Config`` or a
``ConfigError`` that names the file, within a bounded time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from xds_control.config import Config, load_config
from xds_control.config.load import load_model
from xds_control.errors import ConfigError
from xds_lab.fuzz.tokens import CONFIG_TOKENS

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SECONDS = 5.0  # per input; a well-formed 1 MiB config loads in well under a second

VALID = """
pools: [{name: a, endpoints: [{address: 127.0.0.1:8001, weight: 5}]}]
listeners: [{name: gw, address: 127.0.0.1:10000, routes: [{name: r, pool: a}]}]
"""

FRAGMENTS = CONFIG_TOKENS
yaml_like = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=60).map(
    "".join
)

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
documents = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


def expect_config_or_error(path: Path) -> Config | ConfigError:
    started = time.perf_counter()
    outcome: Config | ConfigError
    try:
        outcome = load_config(path)
    except ConfigError as exc:
        outcome = exc
    assert time.perf_counter() - started < SECONDS
    if isinstance(outcome, ConfigError):
        assert str(outcome).startswith(f"{path}: "), str(outcome)
        assert outcome.problems, "a ConfigError must say what is wrong"
        assert all(message for _, message in outcome.problems)
    return outcome


@FUZZ
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    expect_config_or_error(path)


@FUZZ
@given(text=yaml_like, encoding=st.sampled_from(["utf-8", "utf-16", "latin-1", "cp1252"]))
def test_yaml_like_text_in_any_encoding(tmp_path: Path, text: str, encoding: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(text.encode(encoding, errors="replace"))
    expect_config_or_error(path)


@FUZZ
@given(
    where=st.sampled_from(["pools", "listeners", "pools.0", "pools.0.endpoints.0", "signals"]),
    key=st.text(min_size=1, max_size=12),
    value=documents,
)
def test_a_valid_config_with_one_field_replaced(
    tmp_path: Path, where: str, key: str, value: Any
) -> None:
    data = yaml.safe_load(VALID)
    node: Any = data
    for part in where.split("."):
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if isinstance(node, dict):
        node[key] = value
    else:
        node.append(value)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    outcome = expect_config_or_error(path)
    if isinstance(outcome, ConfigError):
        # The error names a field: every problem but a whole-document one has a path.
        assert all(field or "YAML" in message for field, message in outcome.problems)


def billion_laughs(*, depth: int, width: int, root: str) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, depth + 1):
        refs = ", ".join([f"*l{level - 1}"] * width)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + f"\n{root}: *l{depth}\n"


@pytest.mark.parametrize("root", ["pools", "listeners", "unknown"])
@pytest.mark.parametrize(("depth", "width"), [(9, 9), (30, 2), (6, 30)])
def test_alias_bombs_are_refused_quickly(tmp_path: Path, root: str, depth: int, width: int) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(billion_laughs(depth=depth, width=width, root=root), encoding="utf-8")
    assert isinstance(expect_config_or_error(path), ConfigError)


def test_an_alias_bomb_of_valid_endpoints_is_refused_or_loads_quickly(tmp_path: Path) -> None:
    """A bomb whose leaves are valid endpoints: validating the expansion is the expensive part."""
    lines = ["e0: &e0 [{address: 127.0.0.1:8001}, {address: 127.0.0.1:8002}]"]
    lines += [f"e{i}: &e{i} [*e{i - 1}, *e{i - 1}, *e{i - 1}, *e{i - 1}]" for i in range(1, 12)]
    text = "\n".join(lines) + "\n" + VALID.replace("[{address: 127.0.0.1:8001, weight: 5}]", "*e11")
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    expect_config_or_error(path)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        "{a: " * 20_000 + "1" + "}" * 20_000,
        "".join("  " * i + "- \n" for i in range(3_000)),
        "pools: " + "[" * 50_000,
    ],
    ids=["flow-sequences", "flow-mappings", "block-sequences", "unclosed"],
)
def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    assert isinstance(expect_config_or_error(path), ConfigError)


@pytest.mark.parametrize(
    "text",
    [
        "pools: 2024-13-01\n",
        "{2024-12-14: 1}\n",
        "{1: 2}\n",
        "\x00",
        "a: &a [*a]\n",
        "--- 1\n--- 2\n",
        "!!python/object/apply:os.system [echo]\n",
    ],
    ids=["impossible-date", "date-key", "int-key", "nul", "self-alias", "two-documents", "tag"],
)
def test_known_hostile_documents(tmp_path: Path, text: str) -> None:
    """Inputs that once escaped as ValueError, TypeError or a reader error."""
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    assert isinstance(expect_config_or_error(path), ConfigError)


@pytest.mark.parametrize(
    "data",
    [
        VALID.replace("a,", "caf\xe9,").encode("latin-1"),
        VALID.encode("utf-16"),
        b"pools: \xff\xfe\n",
        b"\xed\xa0\x80: 1\n",  # a UTF-8-encoded surrogate
    ],
    ids=["latin-1", "utf-16", "invalid-start-byte", "surrogate"],
)
def test_non_utf8_names_the_file(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    outcome = expect_config_or_error(path)
    assert isinstance(outcome, ConfigError)


@pytest.mark.timeout(60)
def test_a_huge_file_is_refused_or_loaded_in_bounded_time(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    with path.open("wb") as file:
        file.write(VALID.encode())
        chunk = b"# " + b"x" * 1022 + b"\n"
        for _ in range(70 * 1024):  # 70 MiB of comments
            file.write(chunk)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert time.perf_counter() - started < SECONDS
    assert str(info.value).startswith(f"{path}: ")


class Fleet(BaseModel):
    """A stand-in for the lab's fleet files, which ``load_model`` reads."""

    servers: list[dict[str, int]] = []
    name: str = "fleet"


@FUZZ
@given(data=st.one_of(st.binary(max_size=2048), yaml_like.map(str.encode)))
def test_load_model_on_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(data)
    error = None
    try:
        load_model(path, Fleet)
    except ConfigError as exc:
        error = exc
    assert error is None or str(error).startswith(f"{path}: ")
