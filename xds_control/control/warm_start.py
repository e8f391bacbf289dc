"""A restart must not publish engine weights the engine has not computed.

Envoy applies whatever the control plane publishes at once, so a restarted control plane whose
first snapshot carries the base weight (nothing read yet) undoes the engine's work for as long
as the engine takes to reconverge. ``WarmStart`` holds the engine's weights across a restart:

- ``resume`` loads the state file an earlier process saved; when it is fresh and for the same
  config, the weigher resumes from it and its weights are published until signals arrive (the
  same weights, endpoint and pool ones, so the same snapshot version: Envoys that reconnect
  get nothing new);
- otherwise nothing is published until one round of signals came in, or
  ``restart.first_publish_wait_s`` passed (then the engine decides from what it has);
- ``save`` keeps the state file current: when a weight changed, and every
  ``restart.state_refresh_s`` while none did.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

from xds_control.config import Config
from xds_control.control.engine_state import (
    EngineState,
    config_hash,
    default_state_path,
    load_state,
    save_state,
    unusable_because,
)
from xds_control.control.reconcile import EndpointWeight
from xds_control.control.weigher import Weigher
from xds_control.discovery import Endpoint
from xds_control.engine.pools import RouteWeights

__all__ = ["WarmStart", "state_path"]

log = structlog.get_logger(__name__)

_Published = tuple[dict[str, EndpointWeight], dict[str, dict[str, int]]]
"""Endpoint weights, and pool weights by route: what a saved state last held."""


def state_path(config: Config, *, config_path: Path) -> Path:
    """The configured state file (relative to the config's folder), or the default."""
    path = config.restart.state_file
    if path is None:
        return default_state_path(config_path)
    return path if path.is_absolute() else config_path.parent / path


class WarmStart:
    """The weigher's start-up (resumed, waiting, running) and its state file."""

    def __init__(
        self,
        *,
        weigher: Weigher,
        config_path: Path,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._weigher = weigher
        self._config_path = config_path
        self._clock = clock
        self._monotonic = monotonic
        self._resumed = False
        self._running = False
        self._wait_until: float | None = None
        self._saved: tuple[_Published, float] | None = None
        self._hashed: tuple[Config, str] | None = None

    @property
    def running(self) -> bool:
        """Whether the engine decides (signals came, or the wait is over)."""
        return self._running

    async def resume(self, config: Config) -> None:
        """Restore the saved state if it applies to ``config`` now; else start the wait."""
        path = state_path(config, config_path=self._config_path)
        try:
            state = await asyncio.to_thread(load_state, path)
        except (OSError, ValueError) as exc:
            log.warning(
                "engine state unreadable; waiting for signals", path=str(path), error=str(exc)
            )
            state = None
        if state is not None:
            why = unusable_because(state, config=config, now=self._clock())
            if why is None:
                self._weigher.restore(state.pools, routes=state.routes)
                self._resumed = True
                log.info("engine state resumed", path=str(path), version=state.version)
                return
            log.info("engine state ignored; waiting for signals", path=str(path), reason=why)
        self._wait_until = self._monotonic() + config.restart.first_publish_wait_s

    def weights(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
    ) -> dict[str, EndpointWeight] | None:
        """The weights to publish this cycle, or ``None`` to publish nothing yet. Call after
        the weigher's ``fetch``."""
        weigher = self._weigher
        if not self._running and not weigher.has_signals:
            if self._resumed:
                # The weights published before the restart, unchanged until signals come.
                return {
                    d.address: EndpointWeight(d.weight, d.health)
                    for decisions in weigher.decisions.values()
                    for d in decisions
                }
            if self._wait_until is not None and self._monotonic() < self._wait_until:
                return None
            log.warning("no signals yet; the engine decides from what it has")
        self._running = True
        decisions = weigher.decide(config=config, endpoints=endpoints)
        return {a: EndpointWeight(d.weight, d.health) for a, d in decisions.items()}

    async def save(
        self, *, config: Config, version: str, weights: Mapping[str, EndpointWeight]
    ) -> None:
        """Write the state file if a weight (of an endpoint or of a pool on a route) changed or
        it is due for a refresh (only once the engine runs: resumed weights are not re-saved
        as fresh)."""
        if not (self._running and config.restart.save_state):
            return
        now = self._monotonic()
        routes = self._weigher.view().routes
        published = (dict(weights), _published(routes))
        if self._saved is not None:
            saved, saved_at = self._saved
            if saved == published and now - saved_at < config.restart.state_refresh_s:
                return
        if self._hashed is None or self._hashed[0] is not config:
            self._hashed = (config, config_hash(config))  # a 10,000-endpoint config: ~10 ms
        state = EngineState(
            config_hash=self._hashed[1],
            version=version,
            saved_at=self._clock(),
            pools=self._weigher.decisions,
            routes=routes,
        )
        path = state_path(config, config_path=self._config_path)
        await asyncio.to_thread(save_state, path, state)
        self._saved = (published, now)


def _published(routes: RouteWeights) -> dict[str, dict[str, int]]:
    return {key: {p: w.weight for p, w in weights.items()} for key, weights in routes.items()}
