"""A child process that dies with its parent and stops cleanly: no orphans."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import aiohttp
import structlog

from xds_lab.harness.errors import HarnessError

__all__ = ["ManagedProcess", "wait_until_ready"]

log = structlog.get_logger(__name__)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGTERM to the child when the parent exits, however it exits.
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ManagedProcess:
    """Start ``argv`` with output to ``log_path``; ``stop`` sends SIGTERM, then SIGKILL."""

    def __init__(
        self, *, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Spawn the process (its own process group, so Ctrl-C reaches only us)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env={**os.environ, **self.env} if self.env else None,
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )
        log.debug("process started", name=self.name, pid=self.proc.pid)

    @property
    def running(self) -> bool:
        """Started and not yet exited."""
        return self.proc is not None and self.proc.returncode is None

    def tail(self, lines: int = 30) -> str:
        """The end of the process's output, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        """Raise ``HarnessError`` with the output's tail if the process has exited."""
        if self.proc is not None and self.proc.returncode is not None:
            raise HarnessError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL at once (to simulate a crash)."""
        if self.running:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def stop(self, *, timeout: float = 10.0) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            if proc is not None:
                await proc.wait()
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def wait_until_ready(
    ready: Callable[[], Awaitable[bool]],
    *,
    process: ManagedProcess,
    timeout: float,
    what: str,
) -> None:
    """Poll ``ready`` until it says yes; fail fast when ``process`` exits, and with its output's
    tail after ``timeout`` seconds. Connection errors while it starts count as "not yet"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        process.check_alive()
        try:
            if await ready():
                return
        except (aiohttp.ClientError, OSError, HarnessError):
            pass
        await asyncio.sleep(0.1)
    raise HarnessError(f"{process.name} {what} within {timeout:g} s:\n{process.tail()}")
