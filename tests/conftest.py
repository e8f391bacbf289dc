"""Suite-wide collection rules, and the environment the tests' processes need."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests start Envoy (a fork: see lab/xds_lab/__init__.py) next to in-process gRPC servers.
# gRPC reads this once, at its first import, and pytest loads this file before any test module
# imports gRPC; the lab's own setting would come too late when a test imports gRPC first.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

_E2E = Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e`` with ``e2e``, so ``-m "not e2e"`` (``make test-fast``)
    skips real processes. A ``pytestmark`` in a conftest marks nothing, and a marker per module
    is one a new file can forget. ``tryfirst``: the marks must be on before ``-m`` deselects."""
    for item in items:
        if item.path.is_relative_to(_E2E):
            item.add_marker(pytest.mark.e2e)
