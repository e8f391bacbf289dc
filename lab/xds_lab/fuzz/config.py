"""Fuzz the config loader: any bytes in the config file give a ``Config`` or a
``ConfigError`` naming the file, never another exception.

``python -m xds_lab.fuzz.config -atheris_runs=20000``
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from xds_lab.fuzz.engine import fuzz, instrumented
from xds_lab.fuzz.tokens import CONFIG_TOKENS

with instrumented():
    from xds_control.config import load_config
    from xds_control.errors import ConfigError

__all__ = ["check"]


_FILE = Path(tempfile.mkdtemp(prefix="xds-fuzz-config-")) / "config.yaml"


def check(data: bytes) -> None:
    """One input: write it as the config file and load it."""
    _FILE.write_bytes(data)
    try:
        load_config(_FILE)
    except ConfigError as exc:
        if not str(exc).startswith(f"{_FILE}: ") or not exc.problems:
            raise AssertionError(f"a ConfigError that does not name the file: {exc}") from exc


if __name__ == "__main__":
    fuzz(check, tokens=CONFIG_TOKENS)
