"""Whatever bytes a config file holds, loading it raises ConfigError naming the file."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import load_config
from xds_control.config.document import parse_yaml
from xds_control.discovery import parse_endpoints_file
from xds_control.errors import ConfigError, DiscoveryError

BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"pools:\n  - name: caf\xe9\n", "not UTF-8 at byte 20 (line 2)"),
        (b"", "the file is empty"),
        (b"a: 2001-13-01\n", "not valid YAML: month must be in 1..12"),
        (b"a: &a [*a]\n", "an alias refers to itself"),
        (b"[" * 10_000 + b"]" * 10_000, "nested too deeply"),
        (BILLION_LAUGHS.encode(), "once aliases are expanded"),
        (b"{1: 2}\n", "top-level keys must be names"),
        (b"pools: [\n  {{{", "not valid YAML"),
    ],
)
def test_bad_bytes_are_a_config_error_naming_the_file(
    data: bytes, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: "), info.value
    assert expected in str(info.value)


def test_an_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)  # a directory


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_no_input_raises_anything_but_config_error(data: bytes | str) -> None:
    with contextlib.suppress(ConfigError):
        parse_yaml(data, source="x.yaml")
    with contextlib.suppress(DiscoveryError):
        parse_endpoints_file(text=data, source="eps.yaml")
