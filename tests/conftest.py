"""Suite-wide collection rules, and the environment the tests' processes need."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

# Tests start Envoy (a fork: see lab/xds_lab/__init__.py) next to in-process gRPC servers.
# gRPC reads this once, at its first import, and pytest loads this file before any test module
# imports gRPC; the lab's own setting would come too late when a test imports gRPC first.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

_E2E = Path(__file__).resolve().parent / "e2e"
_REAL_ENGINE = _E2E / "real_engine"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under ``tests/e2e`` with ``e2e``, so ``-m "not e2e"`` (``make test-fast``)
    skips real processes. A ``pytestmark`` in a conftest marks nothing, and a marker per module
    is one a new file can forget. ``tryfirst``: the marks must be on before ``-m`` deselects.

    ``make test`` runs two lanes side by side: ``-m "serial or fault"`` (tests that judge times
    or rates under steady load, one at a time as before) and everything else; the tests under
    ``tests/e2e/real_engine`` (marked ``vllm`` here) run in a third lane of their own, in one
    process, which starts their real vLLM servers once."""
    for item in items:
        if item.path.is_relative_to(_E2E):
            item.add_marker(pytest.mark.e2e)
        if item.path.is_relative_to(_REAL_ENGINE):
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(autouse=True)
def _structlog_as_found() -> Iterator[None]:
    """A test that configures structlog in this process (``CliRunner().invoke`` of the CLI runs
    ``configure_logging``) ties every logger to the stream it had then, which the runner or
    pytest closes afterwards: every later test that logs would fail with "I/O operation on
    closed file", and which tests those are depends on the order (and on the xdist worker).
    Put the configuration back and forget the loggers cached under it."""
    before = structlog.get_config()
    yield
    if structlog.get_config() == before:
        return
    structlog.configure(**before)
    proxy = type(structlog.get_logger())
    for module in list(sys.modules.values()):
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, proxy):
                value.__dict__.pop("bind", None)  # cache_logger_on_first_use's cached logger


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Why each rerun test failed the first time (pytest-rerunfailures' summary names the test
    only): a miss a rerun covered still says what it was."""
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns:
        return
    terminalreporter.section("why the rerun tests failed first")
    for report in reruns:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = crash.message if crash is not None else str(report.longrepr)
        terminalreporter.write_line(f"{report.nodeid}: {reason[:2000]}")
