"""The classifier's Lua, run under Lua 5.1 (LuaJIT's dialect, as in Envoy) through lupa, with
a fake request handle standing in for Envoy's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xds_control.config import Classify, Listener
from xds_control.xds.lua import classifier_source

lua51 = pytest.importorskip("lupa.lua51")

MODEL_HEADER = "x-model"


def _listener(**classify: Any) -> Listener:
    return Listener.model_validate(
        {
            "name": "gateway",
            "address": "127.0.0.1:8080",
            "classify": classify,
            "routes": [
                {"name": "code", "pool": "a", "match": {"keywords": ["def ", "Import "]}},
                {"name": "all", "pool": "a"},
            ],
        }
    )


class FakeHeaders:
    """Header map; Lua strings cross as bytes (the runtime has no encoding, as Envoy's)."""

    def __init__(self, values: dict[bytes, bytes]) -> None:
        self.values = values
        self.in_scope = True

    def get(self, name: bytes) -> bytes | None:
        assert self.in_scope, "header map used after a yield (Envoy: outside of proper scope)"
        return self.values.get(name)

    def add(self, name: bytes, value: bytes) -> None:
        assert self.in_scope, "header map used after a yield (Envoy: outside of proper scope)"
        self.values[name] = value

    def replace(self, name: bytes, value: bytes) -> None:
        assert self.in_scope, "header map used after a yield (Envoy: outside of proper scope)"
        self.values[name] = value


class FakeBody:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def length(self) -> int:
        return len(self.data)

    def getBytes(self, start: int, length: int) -> bytes:
        return self.data[start : start + length]


class FakeHandle:
    """Envoy's request handle, as much as the script uses."""

    def __init__(self, body: bytes | None, headers: dict[str, str]) -> None:
        self._values = {k.encode(): v.encode() for k, v in headers.items()}
        self._headers = FakeHeaders(self._values)
        self._body = body
        self.body_read = False
        self.route_cleared = False

    def headers(self) -> FakeHeaders:
        return self._headers

    def body(self) -> FakeBody | None:
        # Envoy yields the script here; header maps taken before go out of scope.
        self.body_read = True
        self._headers.in_scope = False
        self._headers = FakeHeaders(self._values)
        return None if self._body is None else FakeBody(self._body)

    def clearRouteCache(self) -> None:
        self.route_cleared = True


@pytest.fixture
def lua() -> Any:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True, encoding=None)
    listener = _listener(max_body_bytes=2048, prefix_bytes=16)
    assert listener.classify is not None
    source = classifier_source(listener.classify, listener=listener, model_header=MODEL_HEADER)
    runtime.execute(source.encode())
    return runtime


def _run(lua: Any, body: bytes | str | None, **headers: str) -> FakeHandle:
    data = body.encode() if isinstance(body, str) else body
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    if data is not None and "content-length" not in sent:
        sent["content-length"] = str(len(data))
    handle = FakeHandle(data, sent)
    lua.globals().envoy_on_request(handle)
    return handle


def _set(handle: FakeHandle) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in handle.headers().values.items()}


def chat(system: str | None, user: str, **extra: Any) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}
    ]
    return json.dumps({"model": "llama-3-8b", "messages": messages, **extra})


def test_chat_body_sets_every_header(lua: Any) -> None:
    handle = _run(lua, chat("You are terse.", "x" * 400, stream=True, max_tokens=64))
    got = _set(handle)
    assert got["x-model"] == "llama-3-8b"
    assert got["x-prompt-tokens"] == str(-(-len("You are terse." + "x" * 400) // 4))
    assert got["x-stream"] == "true"
    assert got["x-max-tokens"] == "64"
    assert got["x-cost-tokens"] == str(int(got["x-prompt-tokens"]) + 64)
    assert len(got["x-prefix-hash"]) == 16
    assert got["x-prompt-keywords"] == ",,"
    assert handle.route_cleared


def test_prefix_hash_follows_the_system_message_or_the_first_bytes(lua: Any) -> None:
    def key(body: str) -> str:
        return _set(_run(lua, body))["x-prefix-hash"]

    assert key(chat("sys A", "one")) == key(chat("sys A", "two"))
    assert key(chat("sys A", "one")) != key(chat("sys B", "one"))
    # No system message: the first prefix_bytes (16) of the prompt decide.
    assert key(chat(None, "0123456789abcdef-one")) == key(chat(None, "0123456789abcdef-two"))
    assert key(chat(None, "0123456789abcdeX-one")) != key(chat(None, "0123456789abcdef-one"))
    completion = json.dumps({"model": "m", "prompt": "0123456789abcdef-three"})
    assert key(completion) == key(chat(None, "0123456789abcdef-one"))


def test_escapes_decode_so_equal_text_hashes_equal(lua: Any) -> None:
    escaped = '{"model": "m", "prompt": "caf\\u00e9 \\"q\\"\\n\\\\ \\/"}'
    plain = json.dumps({"model": "m", "prompt": 'café "q"\n\\ /'}, ensure_ascii=False)
    a, b = _set(_run(lua, escaped)), _set(_run(lua, plain))
    assert a["x-prefix-hash"] == b["x-prefix-hash"]
    assert a["x-prompt-tokens"] == b["x-prompt-tokens"]


def test_keywords_name_the_routes_whose_words_the_prompt_holds(lua: Any) -> None:
    got = _set(_run(lua, chat(None, "please IMPORT numpy")))
    assert got["x-prompt-keywords"] == ",code,"


def test_content_parts_and_completion_lists_count(lua: Any) -> None:
    parts = json.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a" * 40}]}],
            "max_completion_tokens": 7.9,
        }
    )
    got = _set(_run(lua, parts))
    assert (got["x-prompt-tokens"], got["x-max-tokens"], got["x-stream"]) == ("10", "7", "false")
    listed = json.dumps({"model": "m", "prompt": ["a" * 8, "b" * 8]})
    assert _set(_run(lua, listed))["x-prompt-tokens"] == "4"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '{"model": "m", "prompt": "unterminated',
        '{"model": "m"}',
        "[1, 2, 3]",
        '{"model": "m", "prompt": "p"} trailing',
        '{"a":' * 40 + "1" + "}" * 40,
        '{"model": "m", "prompt": "bad \\q escape"}',
        "",
    ],
)
def test_unreadable_bodies_set_nothing(lua: Any, body: str) -> None:
    handle = _run(lua, body)
    assert set(_set(handle)) == {"content-length"}
    assert not handle.route_cleared


def test_oversized_or_unsized_bodies_are_not_read(lua: Any) -> None:
    big = _run(lua, chat(None, "y" * 4000))
    assert not big.body_read
    assert "x-model" not in _set(big)
    chunked = FakeHandle(chat(None, "y").encode(), {})
    lua.globals().envoy_on_request(chunked)
    assert not chunked.body_read


def test_client_headers_win_and_a_classified_client_is_not_read(lua: Any) -> None:
    partial = _set(_run(lua, chat(None, "hello"), x_model="mine"))
    assert partial["x-model"] == "mine"
    assert "x-prompt-tokens" in partial
    both = _run(lua, chat(None, "hello"), x_model="mine", x_prefix_hash="p1")
    assert not both.body_read


def test_the_cost_is_prompt_plus_max_tokens_in_one_bounded_whole_number(lua: Any) -> None:
    def cost(body: str, **headers: str) -> str:
        return _set(_run(lua, body, **headers))["x-cost-tokens"]

    assert cost(json.dumps({"model": "m", "prompt": "a" * 400, "max_tokens": 50})) == "150"
    assert cost(json.dumps({"model": "m", "prompt": "a" * 400})) == "100"
    assert cost(json.dumps({"model": "m", "prompt": "", "max_tokens": 0})) == "1"
    assert cost(json.dumps({"model": "m", "prompt": "abc", "max_tokens": 1e300})) == "1000000000"
    assert cost(json.dumps({"model": "m", "prompt": "a" * 8, "max_tokens": -5})) == "2"
    body = json.dumps({"model": "m", "prompt": "a" * 400, "max_tokens": 50})
    # A client's own whole number wins; anything else Envoy would count as one token.
    assert cost(body, x_cost_tokens="7") == "7"
    for garbage in ("0", "-3", "1.5", "12abc", "99999999999", " 5"):
        assert cost(body, x_cost_tokens=garbage) == "150", garbage


def test_a_model_with_header_unsafe_characters_is_not_copied(lua: Any) -> None:
    got = _set(_run(lua, json.dumps({"model": "a\r\nx-evil: 1", "prompt": "p"})))
    assert "x-model" not in got
    assert "x-prompt-tokens" in got


def test_settings_render_every_byte_safely() -> None:
    listener = _listener()
    weird = listener.model_copy(
        update={
            "routes": (
                listener.routes[0].model_copy(
                    update={
                        "match": listener.routes[0].match.model_copy(
                            update={"keywords": ('"]] \\ é\n',)}
                        )
                    }
                ),
                listener.routes[1],
            )
        }
    )
    runtime = lua51.LuaRuntime(encoding=None)
    runtime.execute(
        classifier_source(Classify(), listener=weird, model_header="X-Model").encode()
        + b"\nRESULT = CLASSIFY"
    )
    settings = runtime.globals().RESULT
    assert settings.keywords[1].words[1] == '"]] \\ é\n'.encode()
    assert settings.headers.model == b"x-model"


FINITE = st.floats(allow_nan=False, allow_infinity=False)  # JSON has no NaN or Infinity
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60)


@settings(max_examples=150, deadline=None)
@given(
    system=st.one_of(st.none(), TEXT),
    user=st.lists(TEXT, min_size=1, max_size=4),
    extra=st.dictionaries(
        st.text(max_size=8).filter(lambda k: k not in {"model", "messages", "prompt"}),
        st.recursive(
            st.none() | st.booleans() | st.integers() | FINITE | TEXT,
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
            max_leaves=8,
        ),
        max_size=3,
    ),
    ascii_only=st.booleans(),
)
def test_any_chat_body_counts_its_prompt_bytes(
    system: str | None, user: list[str], extra: dict[str, Any], ascii_only: bool
) -> None:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True, encoding=None)
    listener = _listener()
    assert listener.classify is not None
    runtime.execute(
        classifier_source(listener.classify, listener=listener, model_header=MODEL_HEADER).encode()
    )
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": text} for text in user
    ]
    body = json.dumps({**extra, "model": "m", "messages": messages}, ensure_ascii=ascii_only)
    got = _set(_run(runtime, body))
    prompt_bytes = len(((system or "") + "".join(user)).encode())
    assert got["x-prompt-tokens"] == str(-(-prompt_bytes // 4))

    def number(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)

    max_tokens: Any = extra.get("max_tokens")
    if not number(max_tokens):
        max_tokens = extra.get("max_completion_tokens")
    budget = int(min(max_tokens, 10**9)) if number(max_tokens) and max_tokens >= 0 else 0
    want = min(10**9, max(1, -(-prompt_bytes // 4) + budget))
    assert got["x-cost-tokens"] == str(want)
    # The same prompt, escaped or not, keys the same server.
    other = json.dumps({"model": "m", "messages": messages}, ensure_ascii=not ascii_only)
    assert _set(_run(runtime, other))["x-prefix-hash"] == got["x-prefix-hash"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_fail_the_request(body: bytes) -> None:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True, encoding=None)
    listener = _listener()
    assert listener.classify is not None
    runtime.execute(
        classifier_source(listener.classify, listener=listener, model_header=MODEL_HEADER).encode()
    )
    _run(runtime, body)  # sets headers or not; never raises
