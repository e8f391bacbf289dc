"""What the product decides, bit for bit as recorded: each engine cycle's published weights and
health per endpoint and each route's pool weights, each snapshot's version per node group and a
sha256 of each resource's bytes, and each destination the picker names (or none, when Envoy's
fallback policy decides), for fixed, seeded inputs (``harness.py`` says which).

``golden.json`` is the contract: a refactoring must leave it as it is. Never record it anew to
make a change pass. When an API the harness calls moves or is renamed, adapt ``harness.py``
only. Only a deliberate change of behaviour, said so in its commit, records it anew, with:

    PYTHONPATH=tests .venv/bin/python -m golden.harness
"""

from __future__ import annotations

import functools
import json
from typing import Any

from golden.harness import GOLDEN, dumps, record


@functools.cache
def _record(part: str) -> tuple[list[Any], list[Any]]:
    """The recorded rows of ``part`` and today's (as JSON reads them back: the same types)."""
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    found = json.loads(dumps(_today()))
    return expected[part], found[part]


@functools.cache
def _today() -> dict[str, Any]:
    return record()


def _first_difference(expected: list[Any], found: list[Any]) -> str:
    for want, got in zip(expected, found, strict=False):
        if want != got:
            return f"expected {json.dumps(want)}\n     got {json.dumps(got)}"
    return f"{len(expected)} rows recorded, {len(found)} now"


def test_the_weights_of_every_cycle_are_as_recorded() -> None:
    expected, found = _record("weights")
    assert expected == found, _first_difference(expected, found)


def test_every_snapshot_resource_and_version_is_as_recorded() -> None:
    expected, found = _record("snapshots")
    assert expected == found, _first_difference(expected, found)


def test_every_pick_is_as_recorded() -> None:
    expected, found = _record("picks")
    assert expected == found, _first_difference(expected, found)
