"""The weight engine's state on disk, so a restarted control plane resumes instead of publishing
the base weight.

The engine's whole state is its last decisions (``compute_weights`` takes them back as
``previous``), so the file holds those, per pool, minus the raw samples (which only explain a
decision), and the pool weights of routes over several pools (``compute_route_weights`` takes
those back the same way; a file without them, from before they were saved, resumes none), plus
what says whether they still apply: when they were saved, the hash of the config they were
computed for, and the snapshot version they were published in. A state that is older than the
shortest ``hold_s`` (the engine itself would stop trusting such weights) or from another config
is ignored. The file is JSON, written to a temporary file beside it and renamed over it
(``os.replace``), so a crash mid-write leaves the old file or the new one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xds_control.config import Config
from xds_control.discovery import Health
from xds_control.engine import Factors, WeightDecision
from xds_control.engine.pools import PoolWeight, RouteWeights

__all__ = [
    "EngineState",
    "config_hash",
    "decode_state",
    "default_state_path",
    "encode_state",
    "load_state",
    "save_state",
    "unusable_because",
]

FORMAT = 1


@dataclass(frozen=True, slots=True)
class EngineState:
    """The engine's decisions at ``saved_at`` (Unix seconds), for the config ``config_hash``."""

    config_hash: str
    version: str
    """The snapshot version these weights were published in."""
    saved_at: float
    pools: Mapping[str, tuple[WeightDecision, ...]]
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
                name: [_encode_decision(d) for d in decisions]
                for name, decisions in state.pools.items()
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
    engine version's decision fields, garbage)."""
    try:
        data = json.loads(text)
        if data["format"] != FORMAT:
            raise ValueError(f"format {data['format']!r}, expected {FORMAT}")
        return EngineState(
            config_hash=str(data["config_hash"]),
            version=str(data["version"]),
            saved_at=float(data["saved_at"]),
            pools={
                str(name): tuple(_decode_decision(d) for d in decisions)
                for name, decisions in data["pools"].items()
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


def _encode_decision(decision: WeightDecision) -> dict[str, Any]:
    fields = decision._asdict()
    fields["health"] = decision.health.value
    fields["factors"] = decision.factors._asdict()
    del fields["sample"]  # raw readings only explain a decision; the next cycle reads anew
    return fields


def _decode_decision(fields: dict[str, Any]) -> WeightDecision:
    fields = dict(fields)
    fields["health"] = Health(fields["health"])
    fields["factors"] = Factors(**fields["factors"])
    fields["sample"] = None
    decision = WeightDecision(**fields)
    if not isinstance(decision.weight, int) or not 1 <= decision.weight <= 100:
        raise ValueError(f"{decision.address}: weight {decision.weight!r} is not in 1..100")
    return decision


def _encode_pool_weight(weight: PoolWeight) -> dict[str, Any]:
    return dataclasses.asdict(weight)


def _decode_pool_weight(fields: dict[str, Any]) -> PoolWeight:
    weight = PoolWeight(**fields)
    if not isinstance(weight.weight, int) or not 1 <= weight.weight <= 100:
        raise ValueError(f"pool {weight.pool}: weight {weight.weight!r} is not in 1..100")
    return weight
