"""``xds-control serve`` as a real child process, and its admin API."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess, wait_until_ready

__all__ = ["ControlPlaneProcess"]


class ControlPlaneProcess:
    """The control plane serving ``config_path`` on free loopback ports (kept across restarts,
    so Envoy finds it again)."""

    def __init__(
        self,
        *,
        config_path: Path,
        workdir: Path,
        log_level: str = "info",
        xds_address: str | None = None,
    ) -> None:
        self.config_path = config_path
        self.xds_port = free_port()
        self.xds_address = xds_address or f"127.0.0.1:{self.xds_port}"
        """Where it serves xDS: loopback ``xds_port`` unless given (``unix:///path``)."""
        self.admin_port = free_port()
        self.picker_port = free_port()
        """A port for a config's ``pools[].picker.address`` (``picker_address``): free, and kept
        across restarts like the others, so Envoy's picker cluster stays right."""
        self.workdir = workdir
        self._log_level = log_level
        self._restarts = 0
        self.process = self._new_process()

    def write_config(self, data: Mapping[str, Any] | str) -> None:
        """Replace the config file atomically (as an editor or a ConfigMap update does); a
        running control plane picks it up on its next reconcile."""
        text = data if isinstance(data, str) else yaml.safe_dump(dict(data))
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.config_path)

    def _new_process(self) -> ManagedProcess:
        return ManagedProcess(
            name="xds-control",
            argv=[
                sys.executable,
                "-m",
                "xds_control",
                "--log-level",
                self._log_level,
                "--log-format",
                "json",
                "serve",
                "--config",
                str(self.config_path),
                "--xds-address",
                self.xds_address,
                "--admin-address",
                f"127.0.0.1:{self.admin_port}",
            ],
            log_path=self.workdir / f"xds-control-{self._restarts}.log",
        )

    @property
    def picker_address(self) -> str:
        """``127.0.0.1:<picker_port>``: where ``serve`` runs the picker of a pool that names it."""
        return f"127.0.0.1:{self.picker_port}"

    @property
    def admin_url(self) -> str:
        """Base URL of the admin API."""
        return f"http://127.0.0.1:{self.admin_port}"

    async def start(self, *, timeout: float = 60.0) -> None:
        """Start and wait for ``/readyz``."""
        await self.process.start()

        async def ready() -> bool:
            async with (
                aiohttp.ClientSession() as session,
                session.get(self.admin_url + "/readyz") as response,
            ):
                return response.status == 200

        await wait_until_ready(ready, process=self.process, timeout=timeout, what="was not ready")

    async def restart(self) -> None:
        """Start a new process on the same ports (after ``kill`` or ``stop``)."""
        await self.process.stop()
        self._restarts += 1
        self.process = self._new_process()
        await self.start()

    async def stop(self) -> None:
        """SIGTERM and wait."""
        await self.process.stop()

    async def get_json(self, path: str) -> Any:
        """GET an admin JSON view."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(self.admin_url + path) as response,
        ):
            response.raise_for_status()
            return await response.json()

    async def metrics(self) -> str:
        """The ``/metrics`` text."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(self.admin_url + "/metrics") as response,
        ):
            return await response.text()
