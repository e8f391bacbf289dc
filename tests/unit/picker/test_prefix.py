"""The template key (the system message, else the prompt's first bytes), the chain of block
hashes, the size; nothing for a body that is no completion request."""

from __future__ import annotations

import json

import pytest

from xds_control.picker.prefix import BLOCK_BYTES, Prompt, prefix_key, read_prompt


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


def _prompt(doc: object) -> Prompt:
    prompt = read_prompt(json.dumps(doc).encode(), prefix_bytes=8)
    assert prompt is not None
    return prompt


def test_size_in_tokens() -> None:
    assert _prompt(_chat("s" * 400, "u" * 40)).tokens == 110  # 4 bytes a token
    assert _prompt({"prompt": "p" * 400}).tokens == 100


def test_blocks_are_shared_exactly_as_far_as_the_prompts_are() -> None:
    system = "s" * (3 * BLOCK_BYTES)
    one = _prompt(_chat(system, "first question " * 20)).blocks
    two = _prompt(_chat(system, "other question " * 20)).blocks
    shared = next(i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b)
    assert (
        shared == 3
    )  # the blocks wholly within the system message; the fourth reaches the question
    assert len(_prompt(_chat(None, "x" * (BLOCK_BYTES - 10))).blocks) == 0  # no full block


def test_a_conversations_next_turn_shares_the_previous_turns_blocks() -> None:
    turn = [{"role": "user", "content": "tell me about caches " * 30}]
    first = _prompt({"messages": turn}).blocks
    turn += [
        {"role": "assistant", "content": "they keep what was computed " * 20},
        {"role": "user", "content": "and then?"},
    ]
    second = _prompt({"messages": turn}).blocks
    assert second[: len(first)] == first
    assert len(second) > len(first)
