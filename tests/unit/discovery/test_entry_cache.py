"""The entry cache gives what a whole parse gives, or hands the text back to it."""

from __future__ import annotations

import pytest

from xds_control.discovery import parse_endpoints_file
from xds_control.discovery.entries import EntryCache
from xds_control.errors import DiscoveryError

BLOCK = "endpoints:\n- address: 10.0.0.1:8000\n  weight: 5\n- address: 10.0.0.2:8000\n"
INDENTED = "# fleet A\nendpoints:  # edited by hand\n\n  - {address: 10.0.0.1:8000, weight: 5}\n"


@pytest.mark.parametrize(
    "text",
    [
        BLOCK,
        INDENTED,
        BLOCK.replace("\n", "\r\n"),
        "endpoints:\n-\n  address: 10.0.0.1:8000\n- address: 10.0.0.2:8000\n",
    ],
)
def test_usual_files_take_the_fast_path_and_match_a_whole_parse(text: str) -> None:
    got = EntryCache().parse(text)
    assert got is not None
    assert got == parse_endpoints_file(text=text, source="eps.yaml")


def test_a_file_rewritten_whole_matches_a_whole_parse() -> None:
    cache = EntryCache()
    for weight in (5, 6):
        text = "endpoints:\n" + "".join(
            f"- address: 10.0.{i // 200}.{i % 200 + 1}:8000\n  weight: {weight}\n"
            for i in range(300)
        )
        assert cache.parse(text) == parse_endpoints_file(text=text, source="eps.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "endpoints: []\n",
        "%YAML 1.1\n---\nendpoints:\n- address: 10.0.0.1:8000\n",
        "endpoints: !!null\n- address: 10.0.0.1:8000\n",
        "endpoints:#x\n- address: 10.0.0.1:8000\n",
        "endpoints:\n- &a {address: 10.0.0.1:8000}\n- *a\n",  # alias across items
        "endpoints:\n- {address: &b 10.0.0.1:8000}\n- {address: &b 10.0.0.2:8000}\n",  # twice
        "endpoints:\n- address: 10.0.0.1:8000\n...\n- address: 10.0.0.2:8000\n",  # end marker
        "endpoints:\n- address: 10.0.0.1:8000\n  weight:\t5\n",  # a tab
        "endpoints:\n- address: '10.0.0.1:8000\n- x'\n",  # a quoted scalar over the cut
        "endpoints:\n- [10.0.0.1:8000,\n- x]\n",  # a flow collection over the cut
        "endpoints:\n- address: 10.0.0.1:8000\nextra: 1\n",  # a key after the list
        "endpoints:\n- address: 10.0.0.1:8000\n---\nendpoints: []\n",  # a second document
        "endpoints:\n- address: 10.0.0.1:8000\n  weight: 0\n",  # invalid: the error's words
        "endpoints:\n- address: 10.0.0.1:8000\u2028- address: 10.0.0.2:8000\n",  # odd break
        # A quoted scalar over a cut, beside an item whose text parses alone.
        "endpoints:\n- address: '10.0.0.1:8000\n- x'\n-\n  address: 10.0.0.2:8000\n",
    ],
)
def test_anything_unusual_is_parsed_whole(text: str) -> None:
    assert EntryCache().parse(text) is None


def test_an_edit_reuses_unchanged_entries_and_matches_a_whole_parse() -> None:
    cache = EntryCache()
    cache.parse(BLOCK)
    edited = BLOCK.replace("weight: 5", "weight: 7") + "- address: 10.0.0.1:8000\n"
    got = cache.parse(edited)
    assert got == parse_endpoints_file(text=edited, source="eps.yaml")
    assert got is not None
    assert [e.weight for e in got] == [7, 10, 10]


def test_a_bad_edit_after_a_good_one_still_fails_whole() -> None:
    cache = EntryCache()
    cache.parse(BLOCK)
    bad = BLOCK.replace("weight: 5", "weight: 500")
    assert cache.parse(bad) is None
    with pytest.raises(DiscoveryError, match=r"endpoints\[0\]\.weight"):
        parse_endpoints_file(text=bad, source="eps.yaml")
