"""`serve` reports a bad flag under the flag's name, and a bad file under the file's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from configs import ONE_POOL


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xds_control", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_bad_flag_is_named_as_the_flag_not_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(ONE_POOL)
    result = serve("--config", str(path), "--xds-address", "nowhere", "--admin-address", "1.2.3")
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert lines[0].startswith("--xds-address: "), result.stderr
    assert lines[1].startswith("--admin-address: "), result.stderr
    assert str(path) not in result.stderr


def test_bad_flags_and_a_bad_file_are_each_reported_under_their_name(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(ONE_POOL.encode() + b"# \xff\n")
    result = serve("--config", str(path), "--xds-address", "nowhere")
    assert result.returncode == 2, result
    assert "--xds-address: " in result.stderr
    assert f"{path}: (file): not UTF-8 at byte" in result.stderr
