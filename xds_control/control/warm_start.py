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

The state file: the engine's whole state is its last decisions' ``EndpointState`` (what
``compute_weights`` takes back as ``previous``, the published weight and health among it), so
the file holds those, per pool, and never the explanations; and the pool weights of routes
over several pools (``compute_route_weights`` takes those back the same way; a file without
them resumes none), plus what says whether they still apply: when they were saved, the hash of
the config they were computed for, and the snapshot version they were published in. A state
that is older than the shortest ``hold_s`` (the engine itself would stop trusting such weights)
or from another config is ignored, and so is a file of another format (an earlier version's,
which saved whole decisions): the plane then starts cold, with a warning. The file is JSON,
written to a temporary file beside it and renamed over it (``os.replace``), so a crash
mid-write leaves the old file or the new one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from xds_control.config import Config
from xds_control.control.weigher import EngineWeights, Weigher
from xds_control.discovery import Endpoint, Health
from xds_control.engine import EndpointState, Factors
from xds_control.engine.pool_weights import PoolWeight, RouteWeights

__all__ = [
    "EngineState",
    "WarmStart",
    "config_hash",
    "decode_state",
    "default_state_path",
    "encode_state",
    "load_state",
    "save_state",
    "state_path",
    "unusable_because",
]

log = structlog.get_logger(__name__)


FORMAT = 2
"""1: whole decisions (before the engine kept its state apart); 2: endpoint states."""


@dataclass(frozen=True, slots=True)
class EngineState:
    """The engine's endpoint states at ``saved_at`` (Unix seconds), for the config
    ``config_hash``."""

    config_hash: str
    version: str
    """The snapshot version these weights were published in."""
    saved_at: float
    pools: Mapping[str, Mapping[str, EndpointState]]
    """Pool -> address -> the endpoint's state, in the pool's endpoint order."""
    routes: RouteWeights = field(default_factory=dict)
    """``listener/route`` -> pool -> its weight on that route."""


def config_hash(config: Config) -> str:
    """A content hash of the config (environment overrides included)."""
    return hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:16]


def default_state_path(config_path: Path) -> Path:
    """A private folder of the temp dir, one file per config path: nothing sensitive beside it,
    and two control planes with different configs on one machine do not share it."""
    key = hashlib.sha256(str(config_path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"xds-control-{os.getuid()}" / f"state-{key}.json"


def unusable_because(state: EngineState, *, config: Config, now: float) -> str | None:
    """Why ``state`` must not be resumed with ``config`` at ``now``; ``None`` when it may."""
    if state.config_hash != config_hash(config):
        return "saved for another config"
    hold = min(pool.weights.hold_s for pool in config.pools)
    age = now - state.saved_at
    if not -1.0 <= age <= hold:
        return f"saved {age:.0f}s ago, past hold_s ({hold:g}s)"
    return None


def encode_state(state: EngineState) -> str:
    """The state as JSON text."""
    return json.dumps(
        {
            "format": FORMAT,
            "config_hash": state.config_hash,
            "version": state.version,
            "saved_at": state.saved_at,
            "pools": {
                name: [_encode_endpoint(address, s) for address, s in states.items()]
                for name, states in state.pools.items()
            },
            "routes": {
                key: [_encode_pool_weight(w) for w in weights.values()]
                for key, weights in state.routes.items()
            },
        },
        separators=(",", ":"),
    )


def decode_state(text: str) -> EngineState:
    """The state in ``text``; ``ValueError`` for anything else (another format, another
    engine version's state fields, garbage)."""
    try:
        data = json.loads(text)
        if data["format"] == 1:
            raise ValueError("format 1, an earlier version's whole decisions; starting cold")
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, expected {FORMAT}")
        return EngineState(
            config_hash=str(data["config_hash"]),
            version=str(data["version"]),
            saved_at=float(data["saved_at"]),
            pools={
                str(name): dict(map(_decode_endpoint, endpoints))
                for name, endpoints in data["pools"].items()
            },
            routes={
                str(key): {w.pool: w for w in map(_decode_pool_weight, weights)}
                for key, weights in data.get("routes", {}).items()
            },
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"not an engine state: {type(exc).__name__}: {exc}") from exc


def save_state(path: Path, state: EngineState) -> None:
    """Write ``state`` atomically (temp file in the same folder, then ``os.replace``). Blocking;
    raises ``OSError``."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(encode_state(state))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_state(path: Path) -> EngineState | None:
    """The state saved at ``path``; ``None`` when there is no file. Blocking; raises
    ``ValueError`` for a file that is not a state and ``OSError`` for one that cannot be read."""
    try:
        owner = path.stat().st_uid
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 at byte {exc.start}") from None
    if owner != os.getuid():
        # The default folder is in a shared temp dir: weights planted by another user are not ours.
        raise ValueError(f"owned by uid {owner}, not by this process's uid {os.getuid()}")
    return decode_state(text)


def _encode_endpoint(address: str, state: EndpointState) -> dict[str, Any]:
    fields: dict[str, Any] = {"address": address, **state._asdict()}
    fields["health"] = state.health.value
    fields["factors"] = state.factors._asdict()
    return fields


def _decode_endpoint(fields: dict[str, Any]) -> tuple[str, EndpointState]:
    fields = dict(fields)
    address = str(fields.pop("address"))
    fields["health"] = Health(fields["health"])
    fields["factors"] = Factors(**fields["factors"])
    state = EndpointState(**fields)
    if not isinstance(state.weight, int) or not 1 <= state.weight <= 100:
        raise ValueError(f"{address}: weight {state.weight!r} is not in 1..100")
    return address, state


def _encode_pool_weight(weight: PoolWeight) -> dict[str, Any]:
    return dataclasses.asdict(weight)


def _decode_pool_weight(fields: dict[str, Any]) -> PoolWeight:
    weight = PoolWeight(**fields)
    if not isinstance(weight.weight, int) or not 1 <= weight.weight <= 100:
        raise ValueError(f"pool {weight.pool}: weight {weight.weight!r} is not in 1..100")
    return weight


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
        self._saved: tuple[EngineWeights, float] | None = None
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

    async def weigh(
        self, *, config: Config, endpoints: Mapping[str, tuple[Endpoint, ...]]
    ) -> EngineWeights | None:
        """One engine cycle, the loop's one way into the engine: ask the sources, then the
        weights to publish, or ``None`` to publish nothing yet. Until signals come, a resumed
        engine publishes the weights it resumed (unchanged); a fresh one waits."""
        weigher = self._weigher
        await weigher.fetch(config=config, endpoints=endpoints)
        if not self._running and not weigher.has_signals:
            if self._resumed:
                return weigher.weights(config)
            if self._wait_until is not None and self._monotonic() < self._wait_until:
                return None
            log.warning("no signals yet; the engine decides from what it has")
        self._running = True
        return weigher.decide(config=config, endpoints=endpoints)

    async def save(self, *, config: Config, version: str, weights: EngineWeights) -> None:
        """Write the state file if a weight (of an endpoint or of a pool on a route) changed or
        it is due for a refresh (only once the engine runs: resumed weights are not re-saved
        as fresh)."""
        if not (self._running and config.restart.save_state):
            return
        now = self._monotonic()
        if self._saved is not None:
            saved, saved_at = self._saved
            if saved == weights and now - saved_at < config.restart.state_refresh_s:
                return
        if self._hashed is None or self._hashed[0] is not config:
            self._hashed = (config, config_hash(config))  # a 10,000-endpoint config: ~10 ms
        state = EngineState(
            config_hash=self._hashed[1],
            version=version,
            saved_at=self._clock(),
            pools=self._weigher.states(),
            routes=self._weigher.view().routes,
        )
        path = state_path(config, config_path=self._config_path)
        await asyncio.to_thread(save_state, path, state)
        self._saved = (weights, now)
