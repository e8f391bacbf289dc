"""The prefix key: the system message, else the prompt's first bytes; none for a body that is
no completion request."""

from __future__ import annotations

import json

import pytest

from xds_control.picker.prefix import prefix_key, read_prompt


def _key(doc: object, prefix_bytes: int = 8) -> bytes | None:
    return prefix_key(json.dumps(doc).encode(), prefix_bytes=prefix_bytes)


def _chat(system: str | None, user: str) -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "user", "content": user}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": [{"type": "text", "text": system}]})
    return {"model": "m", "messages": messages}


def test_system_message_names_the_prefix() -> None:
    assert _key(_chat("be brief", "hi")) == _key(_chat("be brief", "something else"))
    assert _key(_chat("be brief", "hi")) != _key(_chat("be long", "hi"))


def test_without_system_message_the_first_bytes() -> None:
    assert _key({"prompt": "template A: one"}) == _key({"prompt": "template A: two"})
    assert _key({"prompt": "template A"}, 10) != _key({"prompt": "template B"}, 10)
    assert _key(_chat(None, "template A: x")) == _key({"prompt": ["templat", "e A: y"]})


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'{"model": "m"}', b'{"messages": "x"}', b'{"prompt": "cut', b""],
)
def test_no_key_for_what_is_no_completion_request(body: bytes) -> None:
    assert prefix_key(body, prefix_bytes=8) is None


def test_size_of_the_prompt_and_of_its_cacheable_prefix() -> None:
    body = json.dumps(_chat("s" * 400, "u" * 40)).encode()
    prompt = read_prompt(body, prefix_bytes=8)
    assert prompt is not None
    assert (prompt.tokens, prompt.prefix_tokens) == (110, 100)  # 4 bytes a token
    bare = read_prompt(json.dumps({"prompt": "p" * 400}).encode(), prefix_bytes=8)
    assert bare is not None
    assert (bare.tokens, bare.prefix_tokens) == (100, 2)  # only the keyed bytes count as cached
