"""Fleet files and running a whole fleet of simulated servers in one process.

A fleet file lists servers one by one, or as a count per profile over a port range, or both::

    host: 127.0.0.1
    control_port: 8999        # fleet control endpoint (faults by server name); omit for none
    seed: 7
    time_scale: 1.0           # multiply every simulated duration (tests use less than 1)
    servers:
      - {name: h100-a, profile: vllm-h100, port: 9001}
    groups:
      - {profile: triton-a100, count: 2, ports: "9101-9102"}
      - {profile: onnxruntime-l4, count: 2, port_start: 9201, overrides: {max_num_seqs: 32}}

Port 0 (or an omitted port range) lets the operating system pick free ports.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import structlog
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, model_validator

from xds_control.config.load import load_model
from xds_lab.sim.control import control_app
from xds_lab.sim.kv_publisher import KvEventsSpec
from xds_lab.sim.profiles import Profile, get_profile
from xds_lab.sim.server import SimServer

__all__ = ["Fleet", "FleetSpec", "GroupSpec", "ServerSpec", "load_fleet"]

_log = structlog.get_logger(__name__)


class ServerSpec(BaseModel):
    """One server: a unique name, a profile, a port and optional profile overrides."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique name; reported in the x-sim-server header.")
    profile: str = Field(description="A profile name such as vllm-h100 (see profiles.py).")
    port: int = Field(0, ge=0, le=65535, description="0 lets the OS choose a free port.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Profile field values.")
    kv_events: KvEventsSpec | None = Field(
        None, description="Publish KV-cache events as vLLM does; off unless given."
    )


class GroupSpec(BaseModel):
    """``count`` servers of one profile on consecutive ports."""

    model_config = ConfigDict(extra="forbid")

    profile: str
    count: int = Field(ge=1, le=1000)
    ports: str | None = Field(None, description='An inclusive range, "9001-9016".')
    port_start: int | None = Field(None, ge=1, le=65535)
    name_prefix: str | None = Field(None, description="Defaults to the profile name.")
    overrides: dict[str, Any] = Field(default_factory=dict)
    kv_events: KvEventsSpec | None = Field(
        None, description="Every server of the group publishes (ports: free ones, or port + i)."
    )

    def expand(self) -> list[ServerSpec]:
        """The servers this group stands for."""
        start = self.port_start
        if self.ports is not None:
            low, _, high = self.ports.partition("-")
            start = int(low)
            if high and int(high) - start + 1 != self.count:
                raise ValueError(f"port range {self.ports} does not hold {self.count} servers")
        prefix = self.name_prefix or self.profile
        return [
            ServerSpec(
                name=f"{prefix}-{i}",
                profile=self.profile,
                port=0 if start is None else start + i,
                overrides=self.overrides,
                kv_events=self._kv_events(i),
            )
            for i in range(self.count)
        ]

    def _kv_events(self, i: int) -> KvEventsSpec | None:
        spec = self.kv_events
        if spec is None:
            return None
        replay = spec.replay_port
        return spec.model_copy(
            update={
                "port": spec.port + i if spec.port else 0,
                "replay_port": replay + i if replay else replay,
            }
        )


class FleetSpec(BaseModel):
    """A whole fleet file."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field("127.0.0.1", description="Loopback by default: the sim is a test tool.")
    control_port: int | None = Field(None, ge=0, le=65535, description="Fleet control endpoint.")
    seed: int = Field(0, description="Seeds each server's jitter and error-rate dice.")
    time_scale: float = Field(1.0, gt=0.0, description="Multiplies every simulated duration.")
    servers: list[ServerSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Self:
        names = [s.name for s in self.all_servers()]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate server names: {', '.join(dupes)}")
        ports = [s.port for s in self.all_servers() if s.port]
        if len(ports) != len(set(ports)):
            raise ValueError("two servers share a port")
        if not names:
            raise ValueError("the fleet has no servers")
        for server in self.all_servers():
            try:
                get_profile(server.profile, **server.overrides)
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"server {server.name}: {exc}") from exc
        return self

    def all_servers(self) -> list[ServerSpec]:
        """Listed servers, then the groups expanded, in file order."""
        return [*self.servers, *(s for g in self.groups for s in g.expand())]

    def profile_for(self, server: ServerSpec) -> Profile:
        """The server's profile with overrides and the fleet's time scale applied."""
        return get_profile(server.profile, **server.overrides).scaled(self.time_scale)


def load_fleet(path: str | Path) -> FleetSpec:
    """Read and validate a fleet file; raises ``ConfigError`` naming the bad field."""
    return load_model(Path(path), FleetSpec)


class Fleet:
    """Every server of a ``FleetSpec`` plus the optional control endpoint, in this process."""

    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        self.servers: dict[str, SimServer] = {
            s.name: SimServer(
                name=s.name,
                profile=spec.profile_for(s),
                host=spec.host,
                port=s.port,
                seed=spec.seed,
                kv_events=s.kv_events,
            )
            for s in spec.all_servers()
        }
        self._control: web.AppRunner | None = None
        self.control_url: str | None = None

    @property
    def addresses(self) -> dict[str, str]:
        """Server name -> ``IP:PORT`` (a port 0 in the spec is known only once started)."""
        return {name: f"{self.spec.host}:{s.port}" for name, s in self.servers.items()}

    async def start(self) -> None:
        """Start every server (concurrently) and the control endpoint."""
        await asyncio.gather(*(s.start() for s in self.servers.values()))
        if self.spec.control_port is not None:
            runner = web.AppRunner(control_app(self.servers), access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, self.spec.host, self.spec.control_port, reuse_address=True)
            await site.start()
            self._control = runner
            self.control_url = f"http://{self.spec.host}:{runner.addresses[0][1]}"
        _log.info("sim fleet started", servers=len(self.servers), control=self.control_url)

    async def stop(self) -> None:
        """Stop the control endpoint, then every server."""
        if self._control is not None:
            await self._control.cleanup()
            self._control = None
        await asyncio.gather(*(s.stop() for s in self.servers.values()))

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
