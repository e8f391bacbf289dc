"""The README's command samples print what the commands really print (a stale sample misleads
the first reader the project has)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _xds_control(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "xds_control", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_validate_sample_matches_the_command() -> None:
    match = re.search(
        r"^\.venv/bin/xds-control validate --config (\S+)\n# (.+)$", README, re.MULTILINE
    )
    assert match, "README lost its validate sample"
    config, printed = match.groups()
    run = _xds_control("validate", "--config", config, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == printed


def test_invalid_config_sample_matches_the_command(tmp_path: Path) -> None:
    match = re.search(
        r"^\$ xds-control validate --config (\S+)\n((?:.+\n)+?)```", README, re.MULTILINE
    )
    assert match, "README lost its invalid-config sample"
    name, printed = match.groups()
    # A config with exactly the two mistakes the sample shows.
    (tmp_path / name).write_text(
        "pools:\n"
        "  - name: chat\n"
        "    endpoints:\n"
        "      - {address: 10.0.0.1:8000, weight: 0}\n"
        "      - {address: 10.0.1:8000}\n"
        "listeners:\n"
        "  - {name: gateway, address: 127.0.0.1:10000, routes: [{name: all, pool: chat}]}\n"
    )
    run = _xds_control("validate", "--config", name, cwd=tmp_path)
    assert run.returncode == 2
    assert (run.stdout + run.stderr).strip() == printed.strip()
