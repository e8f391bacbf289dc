"""Real vLLM servers (the CPU build) as backends the harness starts, like Envoy and Prometheus.

Each server gets a free loopback port for HTTP and two for its KV-cache events (a ZMQ PUB and a
replay ROUTER, both bound by vLLM: a ``*`` endpoint binds, a host endpoint would make vLLM
connect to a subscriber instead), one CPU thread (``OMP_NUM_THREADS=1`` with
``VLLM_CPU_OMP_THREADS_BIND=nobind``: vLLM 0.32's CPU worker sets its OpenMP threads from its
binding, and ``nobind`` leaves them to ``OMP_NUM_THREADS``; its "auto" would pin every server of
the fleet to the same last core) and 1 GiB of KV cache. Healthy 50-65 s after start on a
2-core VM, so a test run starts its fleet once (``VllmFleet``) and lends it to each test's
``Stack`` (``VllmFleet.lend``), which then neither starts nor stops it.

The block size is vLLM's choice (128 on the CPU build); read it from ``block_size``
(``vllm:cache_config_info``), never assume it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import aiohttp
import structlog

from xds_lab.harness.errors import HarnessError
from xds_lab.harness.ports import free_port
from xds_lab.harness.process import ManagedProcess, wait_until_ready
from xds_lab.real_engine.install import VllmInstall

__all__ = [
    "MODEL_NAME",
    "START_TIMEOUT_S",
    "LentFleet",
    "VllmFleet",
    "VllmServer",
    "metric_value",
]

MODEL_NAME = "m"
"""The name the servers serve the lab's model under (``--served-model-name``)."""
START_TIMEOUT_S = 240.0
"""Healthy in 50-65 s alone; several servers starting side by side on two busy cores take
longer."""

_log = structlog.get_logger(__name__)
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)")


def metric_value(text: str, name: str, **labels: str) -> float:
    """Sum of ``name``'s samples in exposition ``text`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None or found["name"] != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', found["labels"] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(found["value"])
    return total


class VllmServer:
    """One ``vllm.entrypoints.openai.api_server`` process serving the lab's model."""

    def __init__(
        self,
        *,
        name: str,
        install: VllmInstall,
        workdir: Path,
        max_num_seqs: int = 16,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.install = install
        self.workdir = workdir
        self.port = free_port()
        self.kv_port = free_port()
        self.replay_port = free_port()
        self.max_num_seqs = max_num_seqs
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.starts = 0
        self.process: ManagedProcess | None = None

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The server's own base URL (not through Envoy)."""
        return f"http://{self.address}"

    def argv(self) -> list[str]:
        """The command line."""
        events = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://*:{self.kv_port}",
            "replay_endpoint": f"tcp://*:{self.replay_port}",
            "topic": "kv-events",
        }
        return [
            str(self.install.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.install.model),
            "--served-model-name",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dtype",
            "bfloat16",
            "--max-model-len",
            "2048",
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--enable-prefix-caching",
            "--kv-events-config",
            json.dumps(events),
            "--disable-uvicorn-access-log",
            # No torch.compile: it costs 25 s of a start and a tiny model gains nothing by it.
            "--enforce-eager",
            *self.extra_args,
        ]

    def _env(self) -> dict[str, str]:
        return {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "OMP_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            # The tools venv's own packages only: the project's PYTHONPATH would shadow them.
            "PYTHONPATH": "",
            **self.env,
        }

    async def start(self) -> None:
        """Spawn the process (returns at once; ``wait_healthy`` waits)."""
        self.starts += 1
        self.process = ManagedProcess(
            name=f"vllm {self.name}",
            argv=self.argv(),
            log_path=self.workdir / f"vllm-{self.name}-{self.starts}.log",
            env=self._env(),
        )
        await self.process.start()

    async def wait_healthy(self, *, timeout: float = START_TIMEOUT_S) -> None:
        """Until ``/health`` answers 200."""
        if self.process is None:
            raise HarnessError(f"vllm {self.name} was never started")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:

            async def ready() -> bool:
                async with http.get(f"{self.url}/health") as response:
                    return response.status == 200

            await wait_until_ready(ready, process=self.process, timeout=timeout, what="not healthy")
        _log.info("vllm healthy", server=self.name, address=self.address)

    def kill(self) -> None:
        """SIGKILL to the server's whole process group (a crash): its engine core and worker
        too, which hold the KV-event sockets and would keep the ports from a restart."""
        proc = self.process.proc if self.process is not None else None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL."""
        if self.process is not None:
            await self.process.stop(timeout=15.0)

    async def metrics(self) -> str:
        """The server's ``/metrics`` text."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(f"{self.url}/metrics") as response,
        ):
            return await response.text()

    async def block_size(self) -> int:
        """The KV block size vLLM chose, from ``vllm:cache_config_info``'s label."""
        found = re.search(r'vllm:cache_config_info\{[^}]*block_size="(\d+)"', await self.metrics())
        if found is None:
            raise HarnessError(f"vllm {self.name}: no block_size in vllm:cache_config_info")
        return int(found[1])


class VllmFleet:
    """``servers`` real vLLM servers; as ``Backends`` (``xds_lab.harness.stack``) it starts
    them side by side. ``lend`` gives a test's stack the running fleet without handing over its
    start or stop."""

    def __init__(self, servers: Sequence[VllmServer]) -> None:
        self.servers = {s.name: s for s in servers}

    @property
    def addresses(self) -> dict[str, str]:
        """Server name -> ``IP:PORT``."""
        return {n: s.address for n, s in self.servers.items()}

    async def start(self) -> None:
        """Start every server and wait until all are healthy."""
        for server in self.servers.values():
            await server.start()
        try:
            await asyncio.gather(*(s.wait_healthy() for s in self.servers.values()))
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop every server."""
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)

    def lend(self) -> LentFleet:
        """This fleet as a stack's backends whose ``start`` and ``stop`` do nothing."""
        return LentFleet(self)


class LentFleet:
    """A running ``VllmFleet`` seen as one stack's ``Backends``."""

    def __init__(self, fleet: VllmFleet) -> None:
        self.fleet = fleet
        self.servers = fleet.servers

    @property
    def addresses(self) -> dict[str, str]:
        """Server name -> ``IP:PORT``."""
        return self.fleet.addresses

    async def start(self) -> None:
        """Nothing: the fleet's owner started it."""

    async def stop(self) -> None:
        """Nothing: the fleet's owner stops it."""
