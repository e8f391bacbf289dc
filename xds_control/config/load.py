"""Read a config file: YAML, then the model, then the cross-references; errors name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from xds_control.config.cross_checks import NO_POOL, check_references
from xds_control.config.data_path import resolve_data_path
from xds_control.config.document import parse_yaml, read_yaml
from xds_control.config.root import Config
from xds_control.errors import ConfigError

__all__ = ["field_path", "load_config", "load_model", "parse_config", "validation_problems"]

M = TypeVar("M", bound=BaseModel)


def field_path(loc: tuple[int | str, ...]) -> str:
    """``('pools', 0, 'endpoints', 1, 'address')`` -> ``pools[0].endpoints[1].address``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith(("function-", "tagged-union")):
            continue
        else:
            out += f".{part}" if out else part
    return out


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """One ``(field_path, message)`` per pydantic error, in a form an operator reads."""
    errors = exc.errors(include_url=False)
    locs = [tuple(error["loc"]) for error in errors]
    problems = []
    for error in errors:
        loc = tuple(error["loc"])
        # A list whose items failed also reports "too short"; the item errors say it better.
        if error["type"] == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs):
            continue
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        problems.append((field_path(loc), message))
    return problems


def parse_config(*, text: str | bytes, source: str = "") -> Config:
    """Validate YAML text (or bytes, which must be UTF-8) into a ``Config``; raise
    ``ConfigError`` listing every problem."""
    return _to_config(parse_yaml(text, source=source), source=source)


def _to_config(data: Any, *, source: str) -> Config:
    if data is None:
        raise ConfigError([("", "the file is empty")], source=source)
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ConfigError([("", f"expected a mapping at the top, got {kind}")], source=source)
    if keys := [repr(k) for k in data if not isinstance(k, str)]:
        raise ConfigError(
            [("", f"top-level keys must be names, got {', '.join(keys)}")], source=source
        )
    try:
        config = Config(**data)
    except ValidationError as exc:
        problems = validation_problems(exc)
        if not data.get("pools") and "inference_pools" not in data:
            problems.insert(0, NO_POOL)  # said with the field errors, not after their fix
        raise ConfigError(problems, source=source) from exc
    problems = check_references(config)
    if problems:
        raise ConfigError(problems, source=source)
    return resolve_data_path(config)


def load_config(path: Path) -> Config:
    """Read and validate the config file at ``path`` (blocking: call it off the event loop).
    Whatever the file holds, the only error is a ``ConfigError`` naming it."""
    return _to_config(read_yaml(path), source=str(path))


def load_model(path: Path, model: type[M]) -> M:
    """Read a YAML file into ``model`` (fleet files, scenarios); ``ConfigError`` names the
    field, as for the main config."""
    source = str(path)
    data = read_yaml(path)
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=source) from exc
