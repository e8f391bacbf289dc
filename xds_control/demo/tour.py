"""The weights tour: backends, `xds-control serve`, a real Envoy, and traffic through it.

Each phase writes new weights into the config file (the control plane picks the edit up without
a restart), waits until Envoy reports them, sends traffic with many distinct hash keys, and
compares each backend's share with its weight.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from xds_control.harness.backends import BACKEND_HEADER, EchoBackends
from xds_control.harness.control_plane import ControlPlaneProcess
from xds_control.harness.envoy import EnvoyProcess
from xds_control.harness.ports import free_port
from xds_control.harness.traffic import count_backends

__all__ = ["PHASES", "PhaseResult", "run_tour"]

PHASES: tuple[tuple[int, ...], ...] = ((10, 30, 60), (60, 30, 10), (34, 33, 33))
TOLERANCE = 0.06
"""Largest gap between a backend's share and its weight's share that still counts as following."""


@dataclass(frozen=True)
class PhaseResult:
    """What one phase measured."""

    weights: tuple[int, ...]
    counts: dict[str, int]
    expected: dict[str, float]

    @property
    def total(self) -> int:
        """Requests answered by a backend."""
        return sum(self.counts.values())

    def share(self, address: str) -> float:
        """Observed share of ``address``."""
        return self.counts.get(address, 0) / self.total if self.total else 0.0

    @property
    def worst_gap(self) -> float:
        """Largest |observed - expected| over the backends."""
        return max(abs(self.share(a) - e) for a, e in self.expected.items())


def _config(backends: EchoBackends, weights: tuple[int, ...], listener_port: int) -> str:
    return yaml.safe_dump(
        {
            "pools": [
                {
                    "name": "chat",
                    "endpoints": [
                        {"address": backends.address(i), "weight": w} for i, w in enumerate(weights)
                    ],
                }
            ],
            "listeners": [
                {
                    "name": "gateway",
                    "address": f"127.0.0.1:{listener_port}",
                    "routes": [{"name": "completions", "pool": "chat"}],
                }
            ],
        }
    )


def _table(result: PhaseResult, *, index: int) -> Table:
    table = Table(title=f"phase {index + 1}: weights {list(result.weights)}")
    for column in ("backend", "weight", "expected share", "observed share", "requests"):
        table.add_column(column, justify="right")
    for address, expected in result.expected.items():
        observed = result.share(address)
        style = "green" if abs(observed - expected) <= TOLERANCE else "red"
        table.add_row(
            address,
            str(result.weights[list(result.expected).index(address)]),
            f"{expected:.1%}",
            f"[{style}]{observed:.1%}[/{style}]",
            str(result.counts.get(address, 0)),
        )
    return table


async def _wait_for_weights(envoy: EnvoyProcess, expected: dict[str, int]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hosts = {h.address: h.weight for h in await envoy.cluster_hosts("chat")}
        if hosts == expected:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"Envoy did not apply weights {expected}")


def _hash_keys(batch: int) -> Callable[[int], dict[str, str]]:
    # Distinct keys everywhere, so MAGLEV's weighted table decides and not a few hot keys.
    return lambda i: {"x-prefix-hash": f"user-{batch}-{i}"}


async def _phase(
    *,
    envoy: EnvoyProcess,
    backends: EchoBackends,
    url: str,
    weights: tuple[int, ...],
    seconds: float,
) -> PhaseResult:
    addresses = [backends.address(i) for i in range(len(weights))]
    await _wait_for_weights(envoy, dict(zip(addresses, weights, strict=True)))
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    batch = 0
    while time.monotonic() < deadline or not counts:
        counts += await count_backends(
            url=url, count=200, headers_for=_hash_keys(batch), backend_header=BACKEND_HEADER
        )
        batch += 1
    total = sum(weights)
    return PhaseResult(
        weights=weights,
        counts={a: counts[a] for a in addresses},
        expected={a: w / total for a, w in zip(addresses, weights, strict=True)},
    )


async def run_tour(*, duration: float | None, console: Console) -> list[PhaseResult]:
    """Run the phases once (``duration`` seconds in all) or, with ``None``, until cancelled."""
    with tempfile.TemporaryDirectory(prefix="xds-control-demo-") as tmp:
        workdir = Path(tmp)
        backends = EchoBackends(ports=[free_port() for _ in range(3)])
        listener_port = free_port()
        config_path = workdir / "config.yaml"
        config_path.write_text(_config(backends, PHASES[0], listener_port))
        control_plane = ControlPlaneProcess(config_path=config_path, workdir=workdir)
        envoy: EnvoyProcess | None = None
        results: list[PhaseResult] = []
        try:
            await backends.start()
            console.print(f"backends: {', '.join(backends.address(i) for i in range(3))}")
            await control_plane.start()
            console.print(
                f"control plane: xDS 127.0.0.1:{control_plane.xds_port}, "
                f"admin {control_plane.admin_url}"
            )
            envoy = EnvoyProcess(workdir=workdir, xds_port=control_plane.xds_port)
            await envoy.start()
            await envoy.wait_live()
            url = f"http://127.0.0.1:{listener_port}/v1/completions"
            console.print(f"envoy: listener {url}, admin {envoy.admin_url}\n")
            seconds = 5.0 if duration is None else max(duration / len(PHASES), 1.0)
            index = 0
            while duration is None or index < len(PHASES):
                weights = PHASES[index % len(PHASES)]
                config_path.write_text(_config(backends, weights, listener_port))
                result = await _phase(
                    envoy=envoy, backends=backends, url=url, weights=weights, seconds=seconds
                )
                results.append(result)
                console.print(_table(result, index=index % len(PHASES)))
                index += 1
        finally:
            if envoy is not None:
                await envoy.stop()
            await control_plane.stop()
            await backends.stop()
        return results
