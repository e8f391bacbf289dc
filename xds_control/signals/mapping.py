"""Map a series' labels to the endpoint address it describes."""

from __future__ import annotations

import re
from collections.abc import Mapping

from xds_control.config import EndpointMapping

__all__ = ["AddressMapper"]

_GROUP = re.compile(r"\$(\d+)|\$\{(\d+)\}")


class AddressMapper:
    """Applies an ``EndpointMapping``: read ``label``, optionally rewrite it with ``regex``
    (full match) and ``replacement`` (``$1`` groups, as in Prometheus relabelling)."""

    def __init__(self, mapping: EndpointMapping) -> None:
        self.label = mapping.label
        self._regex = re.compile(mapping.regex) if mapping.regex is not None else None
        self._replacement = _GROUP.sub(
            lambda m: rf"\g<{m.group(1) or m.group(2)}>", mapping.replacement.replace("\\", r"\\")
        )

    def address(self, labels: Mapping[str, str]) -> str | None:
        """The address these labels describe, or ``None`` (label missing, regex not matching)."""
        value = labels.get(self.label)
        if value is None:
            return None
        if self._regex is None:
            return value
        match = self._regex.fullmatch(value)
        return match.expand(self._replacement) if match is not None else None
