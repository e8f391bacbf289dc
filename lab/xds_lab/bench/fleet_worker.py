"""The benchmark's simulated fleet as its own process (``python -m
xds_lab.bench.fleet_worker SPEC.json``).

Why a process of its own: the load generator and the fleet would otherwise share one event
loop and one core's worth of GIL, and every latency would include the other's work. Beside the
servers it serves a control app on ``control_port``: the simulator's fault routes under
``/sim`` and, under ``/bench``, a cache reset (cold caches between points without resetting
counters, which the weight engine would read as a restart) and the vLLM prefix counters.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from aiohttp import web

from xds_control.log import configure_logging
from xds_lab.bench.sim_probe import probe_app
from xds_lab.sim.control import control_app
from xds_lab.sim.fleet import Fleet, FleetSpec
from xds_lab.sim.server import SimServer

__all__ = ["bench_app", "main"]


def bench_app(servers: dict[str, SimServer]) -> web.Application:
    """``POST /bench/reset`` (cold caches, no faults), ``GET /bench/counters``."""

    async def reset(_request: web.Request) -> web.Response:
        for server in servers.values():
            await server.clear_faults()
            # Blocks still referenced by a running request stay; the runner resets idle fleets.
            server.scheduler.kv.clear()
        return web.json_response({"reset": sorted(servers)})

    async def counters(_request: web.Request) -> web.Response:
        return web.json_response(
            {
                name: {
                    "prefix_queries": s.stats.prefix_queries,
                    "prefix_hits": s.stats.prefix_hits,
                    "requests_success": s.stats.requests_success,
                    "generation_tokens": s.stats.generation_tokens,
                    "running": len(s.scheduler.running),
                    "waiting": len(s.scheduler.waiting),
                }
                for name, s in servers.items()
            }
        )

    app = web.Application()
    app.router.add_post("/bench/reset", reset)
    app.router.add_get("/bench/counters", counters)
    app.add_subapp("/sim", control_app(servers))
    app.add_subapp("/lab", probe_app(servers))  # loop lag, the ideal picker (sim_probe.py)
    return app


async def _serve(spec: FleetSpec, control_port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Fleet(spec) as fleet:
        runner = web.AppRunner(bench_app(fleet.servers), access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, spec.host, control_port, reuse_address=True).start()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    """``fleet_worker SPEC.json CONTROL_PORT``: serve the fleet until SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    spec = FleetSpec.model_validate_json(Path(args[0]).read_text())
    configure_logging(level="warning", json=True)
    asyncio.run(_serve(spec, int(args[1])))


if __name__ == "__main__":
    main()
