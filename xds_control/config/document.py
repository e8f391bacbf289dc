"""One YAML document from bytes or a file, whatever the bytes hold.

The config and the endpoints files are re-read while the control plane runs, so nothing an
editor (or a truncated copy, or a hostile ConfigMap) can put in them may raise anything but a
``ConfigError`` naming the file and what is wrong: bytes that are not UTF-8 (with the byte
offset and line), a file that cannot be read or is too large, a YAML syntax error, a scalar
PyYAML cannot build (a date like ``2024-13-01``), nesting too deep, or aliases that would
expand into a huge document (a "billion laughs"): aliases are cheap for PyYAML, which shares
the node, but every later walk of the data (pydantic, hashing) pays the expanded size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from xds_control.errors import ConfigError

__all__ = ["MAX_BYTES", "MAX_NODES", "parse_yaml", "read_bytes", "read_yaml"]

MAX_BYTES = 64 * 1024 * 1024
"""Larger files are refused unread: 100,000 endpoints take about 5 MiB."""

MAX_NODES = 5_000_000
"""Expanded YAML nodes (aliases counted each time they are used) a document may hold."""

# libyaml's parser when PyYAML was built with it: about 8x faster than the pure-Python one
# (1,000 endpoints: ~14 ms against ~120 ms), which is most of the time an edit takes to reach
# Envoy. Same safe constructor, same errors (``yaml.YAMLError``).
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path) -> Any:
    """The document in the file at ``path`` (``None`` when empty). Blocking."""
    return parse_yaml(read_bytes(path), source=str(path))


def read_bytes(path: Path) -> bytes:
    """The file's bytes, refused past ``MAX_BYTES``. Blocking."""
    source = str(path)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError([("", f"cannot read: {exc.strerror or exc}")], source=source) from exc
    if len(data) > MAX_BYTES:
        raise ConfigError([("", f"larger than {MAX_BYTES // 2**20} MiB")], source=source)
    return data


def parse_yaml(data: bytes | str, *, source: str = "") -> Any:
    """The one YAML document in ``data``; ``ConfigError`` for anything that is not one."""
    text = _decode(data, source=source) if isinstance(data, bytes) else data
    loader = None
    try:
        loader = _Loader(text)  # its reader already refuses some characters
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, source=source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        # libyaml stops at 1,000 levels with its own words; say it as the pure parser's does.
        deep = "maximum nesting depth" in str(exc)
        message = "nested too deeply" if deep else str(exc)
        raise ConfigError([("", f"not valid YAML: {message}")], source=source) from exc
    except RecursionError as exc:
        raise ConfigError([("", "not valid YAML: nested too deeply")], source=source) from exc
    except (ValueError, OverflowError, TypeError) as exc:
        # PyYAML's constructors: a date that does not exist, a huge exponent.
        raise ConfigError([("", f"not valid YAML: {exc}")], source=source) from exc
    finally:
        if loader is not None:
            loader.dispose()


def _decode(data: bytes, *, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        message = f"not UTF-8 at byte {exc.start} (line {line}): {exc.reason}"
        raise ConfigError([("", message)], source=source) from None


def _check_size(root: yaml.Node, *, source: str) -> None:
    """Count nodes as the data will hold them: an alias counts its whole target again. Shared
    nodes are sized once (memoised), so this is linear in the text, not in the expansion."""
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_ids:
            raise ConfigError([("", "not valid YAML: an alias refers to itself")], source=source)
        open_ids.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_ids.discard(key)
        if total > MAX_NODES:
            raise ConfigError(
                [("", f"more than {MAX_NODES} YAML nodes once aliases are expanded")],
                source=source,
            )
        sizes[key] = total
        return total

    size(root)
