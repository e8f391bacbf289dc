"""``xdsctl watch`` against a live control plane, on a terminal as an operator runs it: the
table shows a weight change while it runs, and Ctrl-C (SIGINT) ends it at once with exit
code 0 and no traceback."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import time

import pytest

from e2e.stack import EchoStack, weighted_config
from e2e.test_xdsctl_envoy import XDSCTL

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """What a process wrote to its pseudo-terminal so far, without ANSI control sequences."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""

    def read(self, timeout: float) -> None:
        if select.select([self.fd], [], [], timeout)[0]:
            try:
                self.text += ANSI.sub("", os.read(self.fd, 65536).decode(errors="replace"))
            except OSError:  # the process closed its side
                time.sleep(timeout)

    async def shows(self, pattern: str, *, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            assert time.monotonic() < deadline, f"no {pattern!r} in:\n{self.text[-2000:]}"
            await asyncio.to_thread(self.read, 0.05)


def _sigint_as_on_a_terminal() -> None:
    """Ctrl-C's default action, as a shell on a terminal gives it. ``make test`` runs this lane
    as a background job, and a non-interactive shell starts those with SIGINT ignored; the
    children inherit that, and Python installs no KeyboardInterrupt for an ignored SIGINT (so
    xdsctl never saw the signal on the fresh clones' runs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.serial
async def test_watch_shows_a_change_as_it_happens_and_stops_on_ctrl_c(
    stack: EchoStack,
) -> None:
    await stack.start(weighted_config(stack, [10, 10]), envoys=0)
    second = re.escape(stack.backends.address(1))
    primary, secondary = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        *(str(XDSCTL), "--server", stack.control_plane.admin_url, "watch", "--interval", "0.1"),
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env={**os.environ, "COLUMNS": "160", "TERM": "xterm"},
        start_new_session=True,
        preexec_fn=_sigint_as_on_a_terminal,
    )
    os.close(secondary)
    terminal = Terminal(primary)
    try:
        await terminal.shows(rf"{second}\s+10\s")
        stack.write_config(weighted_config(stack, [10, 42]))
        await terminal.shows(rf"{second}\s+42\s")  # redrawn in place, no restart

        process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(process.wait(), 60)  # generous: a busy machine
        await asyncio.to_thread(terminal.read, 0.1)
        assert code == 0, terminal.text[-2000:]
        assert "Traceback" not in terminal.text
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(primary)
