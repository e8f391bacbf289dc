"""Fuzz the endpoints file: any bytes in a watched file give endpoints or a
``DiscoveryError`` naming the file, never another exception.

``python -m xds_lab.fuzz.endpoints -atheris_runs=20000``
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from xds_lab.fuzz.engine import fuzz, instrumented
from xds_lab.fuzz.tokens import ENDPOINTS_TOKENS

with instrumented():
    from xds_control.discovery import FileSource
    from xds_control.errors import DiscoveryError

__all__ = ["check"]


_FILE = Path(tempfile.mkdtemp(prefix="xds-fuzz-endpoints-")) / "endpoints.yaml"
_LOOP = asyncio.new_event_loop()  # one for the run: a loop per input would be most of the cost


def check(data: bytes) -> None:
    """One input: write it as the endpoints file and let a fresh ``FileSource`` read it."""
    _FILE.write_bytes(data)
    try:
        _LOOP.run_until_complete(FileSource(_FILE).fetch())
    except DiscoveryError as exc:
        if str(_FILE) not in str(exc):
            raise AssertionError(f"a DiscoveryError that does not name the file: {exc}") from exc


if __name__ == "__main__":
    fuzz(check, tokens=ENDPOINTS_TOKENS)
