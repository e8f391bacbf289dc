"""Request classes in the config: body matches need the listener's classifier, ranges are
ordered, a route names one pool or several, and every problem names its field."""

from __future__ import annotations

import pytest

from xds_control.config import parse_config
from xds_control.errors import ConfigError

HEAD = """
pools:
  - {name: long, endpoints: [{address: 127.0.0.1:8001}]}
  - {name: fast, endpoints: [{address: 127.0.0.1:8002}]}
listeners:
  - name: gateway
    address: 127.0.0.1:10000
"""


def _config(listener_tail: str) -> str:
    return HEAD + listener_tail


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text=text, source="test.yaml")
    return info.value.problems


CLASSES = """
    classify: {max_body_bytes: 32768}
    routes:
      - {name: long-code, pool: long, match: {prompt_tokens: {min: 2000}, keywords: [def]}}
      - {name: chat, pool: fast, match: {stream: true, prompt_tokens: {max: 512}}}
      - {name: split, pools: [{name: long, weight: 3}, {name: fast}], match: {max_tokens: {min: 1}}}
      - {name: default, pool: fast}
"""


def test_classes_parse_in_order_with_their_limits() -> None:
    listener = parse_config(text=_config(CLASSES)).listeners[0]
    assert [r.name for r in listener.routes] == ["long-code", "chat", "split", "default"]
    assert listener.classify is not None
    assert listener.classify.max_body_bytes == 32768
    assert listener.routes[0].match.prompt_tokens is not None
    assert listener.routes[0].match.prompt_tokens.min == 2000
    assert listener.routes[2].pool_names() == ("long", "fast")
    assert [s.weight for s in listener.routes[2].pools] == [3, 1]


def test_body_matches_without_classify_name_the_route() -> None:
    found = problems(_config("    routes:\n      - {name: c, pool: fast, match: {stream: true}}\n"))
    assert found[0][0] == "listeners[0]"
    assert "routes[0].match (c)" in found[0][1]
    assert "classify" in found[0][1]


@pytest.mark.parametrize(
    ("tail", "field", "words"),
    [
        (
            "    classify: {}\n    routes:\n"
            "      - {name: c, pool: fast, match: {prompt_tokens: {min: 10, max: 10}}}\n",
            "listeners[0].routes[0].match.prompt_tokens",
            "must be above",
        ),
        (
            "    classify: {max_body_bytes: 2000000}\n    routes: [{name: c, pool: fast}]\n",
            "listeners[0].classify.max_body_bytes",
            "less than or equal",
        ),
        (
            "    classify: {stream_header: X_Bad}\n    routes: [{name: c, pool: fast}]\n",
            "listeners[0].classify.stream_header",
            "pattern",
        ),
        (
            "    routes: [{name: c, pool: fast, pools: [{name: long}]}]\n",
            "listeners[0].routes[0]",
            "exactly one of pool, pools",
        ),
        (
            "    routes: [{name: c}]\n",
            "listeners[0].routes[0]",
            "exactly one of pool, pools",
        ),
        (
            "    routes: [{name: c, pools: [{name: long}, {name: long}]}]\n",
            "listeners[0].routes[0]",
            "twice",
        ),
        (
            "    routes: [{name: c, pools: [{name: long}, {name: nope}]}]\n",
            "listeners[0].routes[0].pools[1].name",
            "no pool named 'nope'",
        ),
    ],
)
def test_bad_fields_are_named(tail: str, field: str, words: str) -> None:
    found = problems(_config(tail))
    assert any(path == field and words in message for path, message in found), found
