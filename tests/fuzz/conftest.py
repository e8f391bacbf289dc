"""Fuzz tests: garbage in, and the only way out is a typed result or the error made for it.

Each test's budget is small (a few hundred hypothesis examples) so the folder runs inside
``make test``; ``make fuzz`` runs the coverage-guided atheris harnesses for longer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def fuzz_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop for a whole module, so one real server serves every hypothesis example
    (hypothesis runs a test body many times; a server per example would dominate the budget)."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
