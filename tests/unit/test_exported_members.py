"""Each product package's ``__all__`` is exactly what it exports: every public name it binds is
listed, and every listed name exists (after httpx's tests/test_exported_members.py)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import xds_control

PACKAGES = sorted(
    [xds_control.__name__]
    + [m.name for m in pkgutil.walk_packages(xds_control.__path__, "xds_control.") if m.ispkg]
)
DUNDERS_EXPORTED = {"__version__"}
"""Underscored names a package may list, as httpx lists ``__version__``."""
APPLICATIONS = {"xds_control.cli.xdsctl"}
"""Packages whose ``__init__`` is a command (it builds ``xdsctl``) rather than a list of
re-exports: the names it imports for its own use are not exports, so only the listed names are
checked."""


def _public_names(package: types.ModuleType) -> set[str]:
    # Submodules become attributes of their package once imported; they are not exports.
    return {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # from __future__ import annotations
    }


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_exactly_the_exported_names(name: str) -> None:
    package = importlib.import_module(name)
    listed = list(getattr(package, "__all__", []))
    assert len(listed) == len(set(listed)), f"{name}.__all__ lists a name twice"
    missing = [n for n in listed if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ lists names it does not have: {missing}"
    private = sorted(set(listed) - _public_names(package) - DUNDERS_EXPORTED)
    assert not private, f"{name}.__all__ lists private names or modules: {private}"
    if name not in APPLICATIONS:
        unlisted = sorted(_public_names(package) - set(listed))
        assert not unlisted, f"{name} exports names its __all__ does not list: {unlisted}"
