"""Generate the admin API's Python code from ``protos/`` (``make protos``; a test compares).

Usage: ``python protos/generate.py [OUT_DIR]``; OUT_DIR defaults to the repository root, so
``protos/xds_control/admin/v1/admin.proto`` becomes ``xds_control/admin/v1/admin_pb2*.py``
with ``.pyi`` stubs (mypy-protobuf) beside them.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

PROTOS = Path(__file__).resolve().parent
ROOT = PROTOS.parent
BIN = Path(sys.executable).parent
SOURCES = sorted(p.relative_to(PROTOS).as_posix() for p in PROTOS.rglob("*.proto"))


def generate(out: Path) -> None:
    """Write the generated files for every ``.proto`` under ``protos/`` into ``out``."""
    include = str(resources.files("grpc_tools") / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        # mypy-protobuf's plugins sit beside this interpreter, which need not be on PATH
        f"--plugin=protoc-gen-mypy={BIN / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={BIN / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *SOURCES,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
