"""The endpoints file on hostile input: the parser and the watching ``FileSource`` produce
endpoints or a ``DiscoveryError`` naming the file, whatever the bytes, in bounded time; after
an error the next good edit is picked up."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xds_control.discovery import Endpoint, FileSource, parse_endpoints_file
from xds_control.discovery.entries import EntryCache
from xds_control.errors import DiscoveryError
from xds_lab.fuzz.tokens import ENDPOINTS_TOKENS

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SECONDS = 5.0
SOURCE = "endpoints.yaml"

FRAGMENTS = ENDPOINTS_TOKENS
yaml_like = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=60).map(
    "".join
)

endpoint_values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.from_regex(r"\A(\d{1,3}\.){3}\d{1,3}:\d{1,6}\Z"),
)
endpoint_docs = st.dictionaries(
    st.sampled_from(["address", "weight", "labels", "name", "health"]), endpoint_values, max_size=3
)


def expect_endpoints_or_error(data: str | bytes) -> tuple[Endpoint, ...] | DiscoveryError:
    started = time.perf_counter()
    outcome: tuple[Endpoint, ...] | DiscoveryError
    try:
        outcome = parse_endpoints_file(text=data, source=SOURCE)
    except DiscoveryError as exc:
        outcome = exc
    assert time.perf_counter() - started < SECONDS
    if isinstance(outcome, DiscoveryError):
        assert str(outcome).startswith(f"{SOURCE}: "), str(outcome)
    return outcome


@FUZZ
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes(data: bytes) -> None:
    expect_endpoints_or_error(data)


@FUZZ
@given(text=yaml_like)
def test_yaml_like_text(text: str) -> None:
    expect_endpoints_or_error(text)


@FUZZ
@given(endpoints=st.lists(endpoint_docs, max_size=6))
def test_structured_endpoint_lists(endpoints: list[dict[str, Any]]) -> None:
    outcome = expect_endpoints_or_error(yaml.safe_dump({"endpoints": endpoints}))
    if isinstance(outcome, tuple):
        assert len(outcome) == len(endpoints)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        "endpoints: " + "{a: " * 20_000 + "1" + "}" * 20_000,
        "l0: &l0 [a, a, a, a, a, a, a, a, a]\n"
        + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))
        + "endpoints: *l9\n",
        "endpoints: 2024-13-01\n",
        "{1: 2}\n",
        "\x00",
    ],
    ids=["deep-sequences", "deep-mappings", "alias-bomb", "impossible-date", "int-key", "nul"],
)
def test_known_hostile_documents(text: str) -> None:
    assert isinstance(expect_endpoints_or_error(text), DiscoveryError)


@FUZZ
@given(data=st.binary(max_size=2048))
def test_file_source_recovers_after_garbage(tmp_path: Path, data: bytes) -> None:
    """Garbage written over a good file: the source raises ``DiscoveryError`` (or reads the
    garbage as endpoints); the next good edit is served again."""
    path = tmp_path / SOURCE
    source = FileSource(path)
    good = "endpoints: [{address: 127.0.0.1:8001}]\n"

    async def scenario() -> None:
        path.write_text(good, encoding="utf-8")
        assert [e.address for e in await source.fetch()] == ["127.0.0.1:8001"]
        path.write_bytes(data)
        _bump(path, 1)
        error = None
        try:
            await source.fetch()
        except DiscoveryError as exc:
            error = exc
        assert error is None or str(path) in str(error)
        path.write_text(good, encoding="utf-8")
        _bump(path, 2)
        assert [e.address for e in await source.fetch()] == ["127.0.0.1:8001"]

    asyncio.run(scenario())


def _bump(path: Path, step: int) -> None:
    # Rewrites within one mtime tick with the same size would look unchanged to the stamp.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + step * 1_000_000_000))


BASE = "".join(
    ["endpoints:\n"]
    + [f"- address: 10.0.0.{i}:8000\n  weight: {i}\n" for i in range(1, 5)]
    + ["-\n  address: 10.0.0.9:8000\n"]
)
edit = st.tuples(
    st.integers(0, len(BASE)),
    st.lists(st.sampled_from([*FRAGMENTS, "-\n", "\n- ", "\n-\n", "\r", "\u2028"]), max_size=3),
)


@FUZZ
@given(edits=st.lists(edit, min_size=1, max_size=3))
def test_the_entry_cache_agrees_with_a_whole_parse(edits: list[tuple[int, list[str]]]) -> None:
    """After a good version, any edit: the cache gives what the whole parse gives, or hands
    the text to it (``None``)."""
    cache = EntryCache()
    assert cache.parse(BASE) == parse_endpoints_file(text=BASE, source=SOURCE)
    text = BASE
    for at, tokens in edits:
        text = text[:at] + "".join(tokens) + text[at:]
    got = cache.parse(text)
    try:
        whole: tuple[Endpoint, ...] | None = parse_endpoints_file(text=text, source=SOURCE)
    except DiscoveryError:
        whole = None
    assert got is None or got == whole
