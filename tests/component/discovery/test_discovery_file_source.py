"""FileSource on a real file: edits are picked up, a bad edit or a missing file is an error
that names what is wrong (the control loop then keeps the last good set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xds_control.discovery import FileSource
from xds_control.errors import DiscoveryError

GOOD = "endpoints:\n  - {address: 10.0.0.1:8000, weight: 10}\n"
EDITED = "endpoints:\n  - {address: 10.0.0.1:8000, weight: 10}\n  - {address: 10.0.0.2:8000}\n"


def write(path: Path, text: str) -> None:
    """Replace the file as an editor or a ConfigMap update does, and make sure its mtime moves
    even when two writes land in the same clock tick."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    scratch = path.with_suffix(".tmp")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


async def test_reads_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, GOOD)
    endpoints = await FileSource(path).fetch()
    assert [(e.address, e.host, e.port, e.weight) for e in endpoints] == [
        ("10.0.0.1:8000", "10.0.0.1", 8000, 10)
    ]


async def test_picks_up_an_edit(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, GOOD)
    source = FileSource(path)
    assert len(await source.fetch()) == 1
    write(path, EDITED)
    assert [e.address for e in await source.fetch()] == ["10.0.0.1:8000", "10.0.0.2:8000"]


async def test_picks_up_an_in_place_edit_of_the_same_size(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, GOOD)
    source = FileSource(path)
    await source.fetch()
    mtime = path.stat().st_mtime_ns
    path.write_text(GOOD.replace("weight: 10", "weight: 99"), encoding="utf-8")
    os.utime(path, ns=(mtime + 1_000_000_000, mtime + 1_000_000_000))
    assert [e.weight for e in await source.fetch()] == [99]


async def test_a_server_listed_twice_is_refused_naming_both_entries(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, EDITED + "  - {address: 10.0.0.1:8000, weight: 5}\n")
    with pytest.raises(DiscoveryError) as info:
        await FileSource(path).fetch()
    assert "endpoints[2].address: duplicate address '10.0.0.1:8000' (first at endpoints[0]" in str(
        info.value
    )


async def test_an_invalid_edit_names_the_field_until_it_is_fixed(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, GOOD)
    source = FileSource(path)
    await source.fetch()
    write(path, GOOD.replace("weight: 10", "weight: 101"))
    for _ in range(2):  # still wrong on the next fetch: the bad file is never taken as good
        with pytest.raises(DiscoveryError, match=r"eps\.yaml: endpoints\[0\]\.weight"):
            await source.fetch()
    write(path, EDITED)
    assert len(await source.fetch()) == 2


async def test_a_missing_file_is_an_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    source = FileSource(path)
    with pytest.raises(DiscoveryError) as caught:
        await source.fetch()
    assert str(caught.value).startswith(f"{path}: cannot read")
    write(path, GOOD)
    assert len(await source.fetch()) == 1


async def test_a_deleted_file_is_an_error_not_the_old_set(tmp_path: Path) -> None:
    path = tmp_path / "eps.yaml"
    write(path, GOOD)
    source = FileSource(path)
    await source.fetch()
    path.unlink()
    with pytest.raises(DiscoveryError, match="cannot read"):
        await source.fetch()
