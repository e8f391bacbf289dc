"""The chart's files as a test reads them: values merged the way Helm merges them, and a
config block checked by `xds-control validate` itself."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from xds_control.cli.main import app
from xds_lab.sim import tokenizer

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "xds-control"
CI_FILES = sorted((CHART / "ci").glob("*-values.yaml"))


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of `-f` files over values.yaml: maps merge key by key, anything else
    (lists included) replaces, and a null removes the key."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def values(ci_file: Path | None = None) -> dict[str, Any]:
    """values.yaml, with ``ci_file`` over it as `helm install -f ci_file` would have it."""
    defaults: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    if ci_file is None:
        return defaults
    return merge(defaults, yaml.safe_load(ci_file.read_text()) or {})


TOKENIZERS = "/etc/xds-control/tokenizers/"
"""Where the chart mounts ``tokenizers.<name>`` (templates/_helpers.tpl)."""


def _mount_tokenizers(config: dict[str, Any], *, folder: Path) -> dict[str, Any]:
    """``config`` with each pool's ``picker.tokenizer`` under the chart's tokenizer mounts
    moved to ``folder``, where the lab's tokenizer stands in for the volume's files."""
    out = copy.deepcopy(config)
    for pool in out.get("pools") or []:
        picker = pool.get("picker") or {}
        path = picker.get("tokenizer")
        if isinstance(path, str) and path.startswith(TOKENIZERS):
            picker["tokenizer"] = str(
                tokenizer.write(folder / "tokenizers" / path[len(TOKENIZERS) :])
            )
    return out


def validate(config: dict[str, Any], *, folder: Path) -> tuple[int, str]:
    """Write ``config`` as the ConfigMap's config.yaml and run `xds-control validate` on it:
    the model, the cross-references, the endpoint sources and the snapshot the server would
    build (a tokenizer the chart mounts is the lab's, in ``folder``). Returns the exit code
    and what it printed."""
    path = folder / "config.yaml"
    config = _mount_tokenizers(config, folder=folder)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = CliRunner().invoke(app, ["validate", "--config", str(path)])
    return result.exit_code, result.output
