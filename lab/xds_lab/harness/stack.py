"""One stack on loopback for the demo, the benchmarks and the end-to-end tests: a backend
fleet, ``xds-control serve`` as a child process, any number of real Envoys and, if asked, a
real Prometheus scraping the fleet.

What differs between its users is only which backends stand behind Envoy (echo servers, a
simulated fleet in this process, or one in a process of its own) and which config they write;
both are handed in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import structlog

from xds_control.tasks import guarded_task
from xds_control.xds.bootstrap import AdsVariant
from xds_lab.harness.control_plane import ControlPlaneProcess
from xds_lab.harness.envoy import ClusterHost, EnvoyProcess
from xds_lab.harness.errors import HarnessError
from xds_lab.harness.pool_config import POOL
from xds_lab.harness.ports import free_port
from xds_lab.harness.prometheus import Prometheus, Target

__all__ = ["Backends", "Stack"]

_log = structlog.get_logger(__name__)


class Backends(Protocol):
    """The servers behind Envoy.

    ``addresses`` (server name -> ``IP:PORT``) is known before ``start``, so a config can name
    the servers first. ``stop`` is safe after a partial start or none, and after another
    ``stop``.
    """

    @property
    def addresses(self) -> Mapping[str, str]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


B = TypeVar("B", bound=Backends)


class Stack(Generic[B]):
    """``backends``, the control plane serving ``workdir/config.yaml`` and the Envoys started
    against it; ``close`` stops all of them."""

    def __init__(
        self, *, workdir: Path, backends: B, log_level: str = "info", ads: AdsVariant = "sotw"
    ) -> None:
        self.workdir = workdir
        self.ads = ads
        """The xDS variant every Envoy of this stack speaks."""
        self.backends = backends
        self.listener_port = free_port()
        self.control_plane = ControlPlaneProcess(
            config_path=workdir / "config.yaml", workdir=workdir, log_level=log_level
        )
        self.envoys: list[EnvoyProcess] = []
        self.prometheus: Prometheus | None = None
        self._background: list[asyncio.Task[Any]] = []

    @property
    def url(self) -> str:
        """Envoy's listener: where the traffic goes."""
        return f"http://127.0.0.1:{self.listener_port}"

    @property
    def envoy(self) -> EnvoyProcess:
        """The newest Envoy."""
        if not self.envoys:
            raise HarnessError("no Envoy started")
        return self.envoys[-1]

    def write_config(self, data: Mapping[str, Any] | str) -> None:
        """Replace the config file atomically; a running control plane picks it up on its next
        reconcile."""
        self.control_plane.write_config(data)

    async def start(
        self, config: Mapping[str, Any], *, envoys: int = 1, prometheus: bool = False
    ) -> None:
        """Start the backends, Prometheus (if asked: ``config``'s signals then read it), the
        control plane with ``config``, and ``envoys`` Envoys, all LIVE when this returns."""
        await self.backends.start()
        if prometheus:
            url = await self.start_prometheus()
            signals = {**config.get("signals", {}), "prometheus_url": url}
            config = {**config, "signals": signals}
        self.write_config(config)
        await self.control_plane.start()
        for _ in range(envoys):
            await self.add_envoy()

    async def start_prometheus(self, *, scrape_interval_s: float = 1.0) -> str:
        """Start a Prometheus scraping every backend; return its URL once it has scraped each."""
        targets = [Target(address=a) for a in self.backends.addresses.values()]
        self.prometheus = Prometheus(targets=targets, scrape_interval_s=scrape_interval_s)
        await self.prometheus.start()
        await self.prometheus.wait_for_targets(len(targets))
        return self.prometheus.url

    async def add_envoy(
        self, *, node_id: str | None = None, workdir: Path | None = None
    ) -> EnvoyProcess:
        """Start one more Envoy (``envoy-<n>`` by default) and wait until it is LIVE."""
        envoy = EnvoyProcess(
            workdir=workdir or self.workdir,
            xds_port=self.control_plane.xds_port,
            node_id=node_id or f"envoy-{len(self.envoys)}",
            ads=self.ads,
        )
        self.envoys.append(envoy)
        await envoy.start()
        await envoy.wait_live()
        return envoy

    async def stop_envoys(self) -> None:
        """Stop every Envoy and forget them: the next one starts with no connection, outlier or
        load-balancer state."""
        envoys, self.envoys = self.envoys, []
        _raise_first(await asyncio.gather(*(e.stop() for e in envoys), return_exceptions=True))

    async def restart_control_plane(self) -> None:
        """A new control-plane process on the same ports (after a crash, a stop, or to read a
        changed config from scratch); Envoys reconnect by themselves."""
        await self.control_plane.restart()

    def _names(self) -> dict[str, str]:
        return {address: name for name, address in self.backends.addresses.items()}

    async def envoy_hosts(
        self, *, pool: str = POOL, envoy: EnvoyProcess | None = None
    ) -> dict[str, ClusterHost]:
        """Server name (its address if not a backend) -> the host as ``envoy`` (default: the
        newest) reports it in ``/clusters``: the weight and health it really uses."""
        names = self._names()
        hosts = await (envoy or self.envoy).cluster_hosts(pool)
        return {names.get(h.address, h.address): h for h in hosts}

    async def envoy_weights(
        self, *, pool: str = POOL, envoy: EnvoyProcess | None = None
    ) -> dict[str, int]:
        """Server name -> the weight Envoy runs with now."""
        hosts = await self.envoy_hosts(pool=pool, envoy=envoy)
        return {name: host.weight for name, host in hosts.items()}

    async def decisions(self, *, pool: str = POOL) -> dict[str, dict[str, Any]]:
        """Server name -> the engine's explained decision (``/v1/weights?explain=1``); empty
        until the engine has decided."""
        names = self._names()
        data = await self.control_plane.get_json("/v1/weights?explain=1")
        rows = data.get("pools", {}).get(pool, [])
        return {names.get(d["address"], d["address"]): d for d in rows}

    def in_background(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        """Run ``coro`` (load, say) while the stack lives; ``close`` cancels it first."""
        task = guarded_task(coro, name=name)
        self._background.append(task)
        return task

    async def close(self) -> None:
        """Stop background work, the Envoys, the control plane, Prometheus and the backends, in
        that order; safe after a partial start. A failure in one step does not skip the
        others; the first is raised once all have run."""
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        errors: list[BaseException] = []
        for step in (
            self.stop_envoys,
            self.control_plane.stop,
            self.prometheus.stop if self.prometheus is not None else None,
            self.backends.stop,
        ):
            if step is None:
                continue
            try:
                await step()
            except Exception as exc:
                _log.warning("stopping the stack", step=step.__qualname__, exc_info=exc)
                errors.append(exc)
        _raise_first(errors)


def _raise_first(outcomes: list[Any]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
