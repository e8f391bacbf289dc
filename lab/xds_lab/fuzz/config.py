"""Fuzz the config loader: any bytes in the config file give a ``Config`` or a
``ConfigError`` naming the file, never another exception.

``python -m xds_lab.fuzz.config -atheris_runs=20000``
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from xds_lab.fuzz.engine import fuzz, instrumented

with instrumented():
    from xds_control.config import load_config
    from xds_control.errors import ConfigError

__all__ = ["TOKENS", "check"]

TOKENS = [
    "pools:",
    "listeners:",
    "endpoints:",
    "routes:",
    "name: ",
    "pool: ",
    "address: ",
    "127.0.0.1:8001",
    "0.0.0.0:10000",
    "[::1]:80",
    "weight: ",
    "engine: vllm",
    "signals:",
    "prometheus_url: ",
    "endpoints_file: ",
    "match:",
    "prefix: /",
    "lb:",
    "policy: maglev",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ", ",
    ": ",
    "\n",
    "\n  ",
    "&a ",
    "*a",
    "<<: ",
    "!!binary ",
    "!!python/object ",
    "? ",
    "|",
    ">",
    "'",
    '"',
    "#",
    "---\n",
    "%YAML 1.1\n",
    "2024-13-01",
    "1e999",
    "0x1F",
    "~",
    ".nan",
    "\t",
    "\ufeff",
]

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
    fuzz(check, tokens=TOKENS)
