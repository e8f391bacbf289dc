"""The `helm` binary the chart tests run, found as the tests find Envoy: ``HELM_BIN``, then
``.tools/bin/helm`` (``make helm`` puts helm v4 there), then ``helm`` on ``PATH``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from component.deploy.helm_chart import CHART, ROOT

TOOLS_HELM = ROOT / ".tools" / "bin" / "helm"
# With no cluster to ask, helm lints and renders for this Kubernetes: the newest the installed
# kubectl knows (1.35), so lint's deprecation check sees every API removed so far. Chart.yaml
# asks for 1.25 or later.
KUBE_VERSION = "1.35.0"


class _NoDuplicateKeys(yaml.SafeLoader):
    """YAML that refuses a key twice in one mapping. helm lint and helm template let it through
    and PyYAML keeps the last one silently, while the API server warns, or refuses the object
    under strict field validation (kubectl's default): a template that writes a key twice (say
    `resources:` from a default and from a `with`) fails here."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        twice = sorted({str(key) for key in keys if keys.count(key) > 1})
        if twice:
            raise yaml.constructor.ConstructorError(
                None, None, f"key written twice: {', '.join(twice)}", node.start_mark
            )
        return super().construct_mapping(node, deep=deep)


def find_helm() -> Path | None:
    """The first executable of ``HELM_BIN``, the project's ``.tools/bin/helm`` and ``helm`` on
    ``PATH``; None when there is none (a machine that never ran ``make setup``)."""
    candidates = [os.environ.get("HELM_BIN"), str(TOOLS_HELM), shutil.which("helm")]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``helm args...``, its output captured; a failure is the caller's to judge."""
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=60, check=False
    )


def render(helm: Path, *, values_file: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The objects `helm template` renders for release ``xds-control`` in namespace
    ``xds-control`` with ``values_file`` (and each ``--set`` of ``sets``) over values.yaml."""
    run = run_helm(
        helm,
        *("template", "xds-control", str(CHART), "-n", "xds-control", "-f", str(values_file)),
        *("--kube-version", KUBE_VERSION),
        *(arg for value in sets for arg in ("--set", value)),
    )
    assert run.returncode == 0, run.stderr
    return load_manifests(run.stdout)


def load_manifests(text: str) -> list[dict[str, Any]]:
    """The non-empty documents of a multi-document YAML stream; a key written twice in one
    mapping is a ``yaml.YAMLError``."""
    return [doc for doc in yaml.load_all(text, Loader=_NoDuplicateKeys) if doc]
