"""The Lua source Envoy runs to classify requests: ``classify.lua`` with its settings.

The script is a file of the package (read once) and its settings a Lua table written in front
of it, so the same file runs in Envoy and in the unit tests, and a config change only changes
the table.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from xds_control.config import Classify, Listener

__all__ = ["classifier_settings", "classifier_source", "lua_literal"]


@cache
def _script() -> str:
    script = resources.files("xds_control.xds.lua").joinpath("classify.lua")
    return script.read_text(encoding="utf-8")


def _lua_string(text: str) -> str:
    # Lua 5.1 (LuaJIT) has no \u escape: every byte outside printable ASCII becomes \ddd.
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\' or not 32 <= byte < 127:
            out.append(f"\\{byte:03d}" if char not in '"\\' else f"\\{char}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


LuaValue = str | int | bool | list["LuaValue"] | dict[str, "LuaValue"]


def lua_literal(value: LuaValue) -> str:
    """``value`` as a Lua expression (strings, ints, booleans, lists, string-keyed tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _lua_string(value)
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    return "{" + ", ".join(f"[{_lua_string(k)}] = {lua_literal(v)}" for k, v in value.items()) + "}"


def classifier_settings(classify: Classify, *, listener: Listener, model_header: str) -> LuaValue:
    """The ``CLASSIFY`` table: limits, header names by key, keyword groups by route name."""
    return {
        "max_body_bytes": classify.max_body_bytes,
        "prefix_bytes": classify.prefix_bytes,
        "max_depth": classify.max_depth,
        "headers": {
            "model": model_header.lower(),
            "prompt_tokens": classify.prompt_tokens_header,
            "max_tokens": classify.max_tokens_header,
            "cost_tokens": classify.cost_tokens_header,
            "stream": classify.stream_header,
            "prefix_hash": classify.prefix_hash_header,
            "keywords": classify.keywords_header,
        },
        "keywords": [
            {"name": route.name, "words": [w.lower() for w in route.match.keywords]}
            for route in listener.routes
            if route.match.keywords
        ],
    }


def classifier_source(classify: Classify, *, listener: Listener, model_header: str) -> str:
    """The whole Lua source for ``listener``'s classify filter."""
    settings = classifier_settings(classify, listener=listener, model_header=model_header)
    return f"local CLASSIFY = {lua_literal(settings)}\n{_script()}"
