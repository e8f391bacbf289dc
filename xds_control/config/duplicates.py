"""The repeats in a list of named things, each reported at its own path with the first's."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["duplicates"]


def duplicates(items: Iterable[tuple[str, str]], *, what: str) -> list[tuple[str, str]]:
    """``(path, message)`` for every ``(path, value)`` whose value came earlier: the message
    names the value and the path of its first occurrence, so both places can be found."""
    seen: dict[str, str] = {}
    problems = []
    for path, value in items:
        if value in seen:
            problems.append((path, f"duplicate {what} {value!r} (first at {seen[value]})"))
        else:
            seen[value] = path
    return problems
