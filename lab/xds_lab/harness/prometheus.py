"""A real Prometheus server for tests, benchmarks and the demo.

Started from ``PROMETHEUS_BIN``, else ``prometheus`` on ``PATH``, else ``/usr/bin/prometheus``,
with a generated config, a temporary data directory and a free loopback port. Targets come from
a file-SD file, so ``set_targets`` changes them without a restart::

    async with Prometheus(targets=[Target("127.0.0.1:9001", {"server": "a"})]) as prom:
        await prom.wait_for_targets(1)
        rows = await prom.query("DCGM_FI_DEV_FB_USED")
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp
import structlog
import yaml

from xds_lab.harness.errors import HarnessError
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess, wait_until_ready

__all__ = ["Prometheus", "Target", "find_prometheus"]

_log = structlog.get_logger(__name__)


def find_prometheus() -> str | None:
    """The Prometheus binary to run, or ``None`` when there is none on this machine."""
    env = os.environ.get("PROMETHEUS_BIN")
    if env:
        return env if os.access(env, os.X_OK) else None
    found = shutil.which("prometheus")
    if found:
        return found
    return "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None


@dataclass(frozen=True, slots=True)
class Target:
    """A ``host:port`` to scrape and extra labels for its series."""

    address: str
    labels: Mapping[str, str] = field(default_factory=dict)


class Prometheus:
    """One Prometheus process scraping ``targets`` every ``scrape_interval_s`` seconds."""

    def __init__(
        self,
        *,
        targets: Sequence[Target] = (),
        scrape_interval_s: float = 1.0,
        job: str = "sim",
        binary: str | None = None,
    ) -> None:
        self.binary = binary or find_prometheus()
        self.scrape_interval_s = scrape_interval_s
        self.job = job
        self.port = 0
        self._targets = list(targets)
        self._dir: Path | None = None
        self._process: ManagedProcess | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        """Base URL of the HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def _write_targets(self) -> None:
        assert self._dir is not None
        groups = [{"targets": [t.address], "labels": dict(t.labels)} for t in self._targets]
        tmp = self._dir / "targets.json.tmp"
        tmp.write_text(json.dumps(groups))
        # Atomic replace: Prometheus never reads a half-written file.
        tmp.replace(self._dir / "targets.json")

    def set_targets(self, targets: Sequence[Target]) -> None:
        """Replace the scraped targets (picked up by file-SD within about a second)."""
        self._targets = list(targets)
        if self._dir is not None:
            self._write_targets()

    def _config(self, directory: Path) -> dict[str, Any]:
        interval = f"{max(1, round(self.scrape_interval_s * 1000))}ms"
        return {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
            },
            "scrape_configs": [
                {
                    "job_name": self.job,
                    "file_sd_configs": [
                        {"files": [str(directory / "targets.json")], "refresh_interval": "1s"}
                    ],
                }
            ],
        }

    async def start(self, *, timeout_s: float = 30.0) -> None:
        """Write the config, start the process and wait until ``/-/ready`` answers."""
        if self.binary is None:
            raise HarnessError("no Prometheus binary: set PROMETHEUS_BIN or install prometheus")
        self._dir = Path(tempfile.mkdtemp(prefix="xds-control-prometheus-"))
        self._write_targets()
        (self._dir / "prometheus.yml").write_text(yaml.safe_dump(self._config(self._dir)))
        self.port = free_port()
        argv = [
            self.binary,
            f"--config.file={self._dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self._dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self._process = ManagedProcess(name="prometheus", argv=argv, log_path=self._dir / "log")
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        await self._process.start()
        session = self._session

        async def ready() -> bool:
            async with session.get(f"{self.url}/-/ready") as resp:
                return resp.status == 200

        try:
            await wait_until_ready(
                ready, process=self._process, timeout=timeout_s, what="was not ready"
            )
        except HarnessError:
            await self.stop()
            raise
        _log.info("prometheus ready", url=self.url, targets=len(self._targets))

    async def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and remove its data directory."""
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._process is not None:
            await self._process.stop()
            self._process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def _api(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        if self._session is None:
            raise HarnessError("prometheus is not running")
        try:
            async with self._session.get(f"{self.url}{path}", params=params) as resp:
                payload = await resp.json()
        except (aiohttp.ClientError, ValueError) as exc:
            raise HarnessError(f"prometheus API {path} failed: {exc}") from exc
        if payload.get("status") != "success":
            raise HarnessError(f"prometheus API {path}: {payload.get('error', payload)}")
        return payload["data"]

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """Run an instant query; the ``result`` list (each with ``metric`` and ``value``)."""
        data = await self._api("/api/v1/query", {"query": promql})
        result: list[dict[str, Any]] = data["result"]
        return result

    async def wait_for_targets(self, count: int, *, timeout_s: float = 20.0) -> None:
        """Wait until ``count`` targets have been scraped successfully (``up == 1``)."""
        deadline = time.monotonic() + timeout_s
        up = 0
        while time.monotonic() < deadline:
            up = len(await self.query(f'up{{job="{self.job}"}} == 1'))
            if up >= count:
                return
            await asyncio.sleep(0.2)
        raise HarnessError(f"only {up} of {count} targets up after {timeout_s}s")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
