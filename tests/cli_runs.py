"""Run the installed ``xds-control`` CLI as an operator would: a child process, its exit code
and both streams, bounded in time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["validate"]


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    """``xds-control validate --config PATH``."""
    return subprocess.run(
        [sys.executable, "-m", "xds_control", "validate", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
