"""An endpoints file cut at its list items, each item parsed and validated once.

An operator's edit (or a script's) changes one or a few endpoints of a file that lists
hundreds; parsing and validating all of them again is most of the time the edit takes to
reach Envoy (1,000 endpoints: ~23 ms of YAML and ~6 ms of validation, against ~1 ms here).
So the text is cut before each line that starts an item of the ``endpoints`` list (``-`` at
the list's indentation), and an item whose text was seen last time reuses its endpoints.

Each cut parsed on its own means what it means inside the whole file, for the text between
two item lines can only be the first item's own content: a nested block, a block scalar or a
multi-line plain scalar is indented deeper than the item line, and what is not (a quoted or
flow scalar spanning the cut, an alias to an anchor in another item, a second document, a
key after the list) leaves a piece that does not parse, or is not a list of valid items.
Anything unusual of the kind returns ``None`` and the caller parses the whole file, which
also words the error with the item's index.

A text with an anchor or an alias (``&``, ``*``), a document marker, a tab, a byte-order mark
or a line break other than ``\\n`` is parsed whole: each can make a piece mean something else
alone. The new items are parsed together, as one list (a file rewritten whole would otherwise
cost one parser per item, twice the whole parse), when that list has as many items as there
were cuts: a quoted or flow scalar running over a cut would merge two items into one, and
nothing can split one, since each cut holds one item line. Otherwise each is parsed alone.
"""

from __future__ import annotations

import re

from pydantic import TypeAdapter

from xds_control.config import EndpointConfig
from xds_control.config.document import parse_yaml
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.static import to_endpoints

__all__ = ["EntryCache"]

_ENTRIES = TypeAdapter(list[EndpointConfig])

_FIRST_ITEM = re.compile(r"^( *)-(?: |\r?$)", re.MULTILINE)
_BLANK = r"(?: *(?:#[^\n]*)?\r?\n)*"
_HEADER = re.compile(rf"{_BLANK}endpoints:(?: +#[^\n]*)? *\r?\n{_BLANK}")
"""Only ``endpoints:`` with comments and blank lines: no directive, tag, anchor or marker."""
_ODD = re.compile("\r(?!\n)|[\t\x85\u2028\u2029\ufeff&*]")
"""Line breaks YAML knows and ``re``'s ``^`` does not (a cut could miss an item line), tabs
and byte-order marks, which YAML's parsers take differently by position, and anchors and
aliases, which tie items together (an alias to another item, an anchor used twice)."""
_MARKER = re.compile(r"^(?:---|\.\.\.)(?=\s|$)", re.MULTILINE)
"""A document's start or end: a piece that ends its document parses alone, the file does not."""
_MAX_CHARS = 8 * 2**20
"""Larger files are parsed whole, where the limit on YAML nodes (``MAX_NODES``) is counted:
pieces parsed apart could each pass it."""


class EntryCache:
    """The endpoints of the items parsed last time, by their text."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[Endpoint, ...]] = {}

    def parse(self, text: str) -> tuple[Endpoint, ...] | None:
        """The file's endpoints, or ``None`` when the text must be parsed whole."""
        pieces = _cut(text)
        if pieces is None:
            return None
        header, items = pieces
        if _HEADER.fullmatch(header) is None:
            return None
        known = self._items
        try:
            fresh = _parse_items([item for item in dict.fromkeys(items) if item not in known])
        except Exception:  # any failure: the whole parse says it properly
            return None
        if fresh is None:
            return None
        self._items = {item: known.get(item) or fresh[item] for item in items}
        return tuple(ep for item in items for ep in self._items[item])


def _cut(text: str) -> tuple[str, list[str]] | None:
    """The text before the first item, and each item's text from its ``-`` line."""
    if len(text) > _MAX_CHARS or _ODD.search(text) or _MARKER.search(text):
        return None
    first = _FIRST_ITEM.search(text)
    if first is None:
        return None
    cut = re.compile(rf"^(?={first.group(1)}-(?: |\r?$))", re.MULTILINE)
    header, *items = cut.split(text)
    return header, items


def _parse_items(items: list[str]) -> dict[str, tuple[Endpoint, ...]] | None:
    """Each item's endpoints; ``None`` if one is not a list of valid endpoints."""
    out = _parse_together(items) or {}
    for item in items:
        if item not in out:
            endpoints = _parse_alone(item)
            if endpoints is None:
                return None
            out[item] = endpoints
    return out


def _parse_together(items: list[str]) -> dict[str, tuple[Endpoint, ...]] | None:
    """One parse for all ``items``, when it yields one entry per item; else ``None``."""
    if len(items) < 2:
        return None
    try:
        data = parse_yaml("".join(_line(item) for item in items))
    except Exception:  # one of them is broken: each alone finds which
        return None
    if not isinstance(data, list) or len(data) != len(items):
        return None
    endpoints = to_endpoints(_ENTRIES.validate_python(data))
    return {item: (endpoint,) for item, endpoint in zip(items, endpoints, strict=True)}


def _parse_alone(item: str) -> tuple[Endpoint, ...] | None:
    data = parse_yaml(item)
    return _endpoints(data) if isinstance(data, list) else None


def _endpoints(entries: list[object]) -> tuple[Endpoint, ...]:
    return to_endpoints(_ENTRIES.validate_python(entries))


def _line(item: str) -> str:
    return item if item.endswith("\n") else item + "\n"
