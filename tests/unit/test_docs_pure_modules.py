"""docs/architecture.md's list of pure modules is the import-linter contract's list, and every
module its stage table calls pure is on it: the docs call pure only what ``lint-imports``
checks. Both files are read as they stand, so a module moved or added updates two lists and
this test says which one was forgotten."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
CONTRACT = "The pure modules import no aiohttp, grpc or asyncio"
_NAME = re.compile(r"`(xds_control(?:\.\w+)*)`")
_FILE = re.compile(r"`([\w/]+)\.py`")


def _contract() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT]
    return set(contract["source_modules"])


def _listed() -> set[str]:
    """The dotted names in the paragraph that begins "The pure modules" (up to a blank line)."""
    text = ARCHITECTURE.read_text()
    start = text.index("\nThe pure modules")
    end = text.find("\n\n", start + 1)
    return set(_NAME.findall(text[start : end if end >= 0 else None]))


def _called_pure_in_table() -> dict[str, str]:
    """Each module the stage table's "pure?" column says yes of, with its row's stage: the
    whole package where the cell starts with yes, else the files named before the first yes."""
    called: dict[str, str] = {}
    for line in ARCHITECTURE.read_text().splitlines():
        row = re.match(r"\| (\w+) \| `xds_control/(\w+)/` \|.*\| ([^|]*) \|$", line)
        if row is None:
            continue
        stage, folder, cell = row.groups()
        cell = cell.strip()
        if cell.startswith("yes"):
            called[f"xds_control.{folder}"] = stage
        elif " yes" in cell:
            for name in _FILE.findall(cell.split(" yes", 1)[0]):
                called[f"xds_control.{folder}.{name.replace('/', '.')}"] = stage
    return called


def test_the_list_is_the_contracts() -> None:
    listed, contract = _listed(), _contract()
    assert listed, "no list of pure modules found in docs/architecture.md"
    assert sorted(listed - contract) == [], "listed as pure in the docs, not in the contract"
    assert sorted(contract - listed) == [], "in the contract, missing from the docs' list"


def test_the_table_calls_pure_only_what_the_contract_checks() -> None:
    called = _called_pure_in_table()
    assert "xds_control.engine" in called, "the stage table's pure? column was not read"
    unchecked = {name: stage for name, stage in called.items() if name not in _contract()}
    assert unchecked == {}, "called pure in the stage table, not checked by the contract"
