"""Suite-wide collection rules."""

from __future__ import annotations

from pathlib import Path

import pytest

_E2E = Path(__file__).resolve().parent / "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e`` with ``e2e``, so ``-m "not e2e"`` (``make test-fast``)
    skips real processes. A ``pytestmark`` in a conftest marks nothing, and a marker per module
    is one a new file can forget. ``tryfirst``: the marks must be on before ``-m`` deselects."""
    for item in items:
        if item.path.is_relative_to(_E2E):
            item.add_marker(pytest.mark.e2e)
