"""``xds-control validate``: check a config file without serving it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from xds_control.cli.app import App
from xds_control.config import Config, data_path_wanted, load_config
from xds_control.control import ReconcileInputs, fleet_version, reconcile_groups
from xds_control.discovery import Endpoint, endpoint_source
from xds_control.errors import ConfigError, DiscoveryError, SnapshotError
from xds_control.picker.tokenizer import PromptTokenizer, TokenizerError

__all__ = ["EXIT_INVALID", "command"]

EXIT_INVALID = 2

ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="Config file.", envvar="XDS_CONTROL_CONFIG")
]


async def _fetch(config: Config, base: Path) -> dict[str, tuple[Endpoint, ...]]:
    # Kubernetes, InferencePool and DNS pools are checked as fields only: the cluster or the
    # resolver of the place it will run is rarely the one where a config is validated.
    return {
        pool.name: await endpoint_source(pool, base=base).fetch()
        for pool in config.pools
        if pool.kubernetes is None and pool.dns is None and pool.inference_pool is None
    }


def command(ctx: typer.Context, config: ConfigOption) -> None:
    """Print every error with its field path and exit 2, or a summary and exit 0."""
    app: App = ctx.obj
    try:
        loaded = load_config(config)
        endpoints = asyncio.run(_fetch(loaded, config.parent))
        version = fleet_version(
            reconcile_groups(ReconcileInputs(config=loaded, endpoints=endpoints))
        )
    except ConfigError as exc:
        app.err.print(f"{config}: invalid config", markup=False)
        for path, message in exc.problems:
            app.err.print(f"  {path or '(file)'}: {message}", markup=False, highlight=False)
        raise typer.Exit(EXIT_INVALID) from None
    except (DiscoveryError, SnapshotError) as exc:
        app.abort(f"{config}: invalid endpoints: {exc}", EXIT_INVALID)
    if problems := _tokenizer_problems(loaded, config.parent):
        app.err.print(f"{config}: invalid config", markup=False)
        for path, message in problems:
            app.err.print(f"  {path}: {message}", markup=False, highlight=False)
        raise typer.Exit(EXIT_INVALID)
    summary = loaded.summary()
    count = sum(len(e) for e in endpoints.values())
    app.console.print(
        f"{config}: valid: {summary['pools']} pools, {summary['listeners']} listeners, "
        f"{summary['routes']} routes, {count} endpoints; version {version}"
        f"{_data_path_note(loaded)}",
        markup=False,
        highlight=False,
    )


def _tokenizer_problems(config: Config, base: Path) -> list[tuple[str, str]]:
    """Field path -> why, for each picker tokenizer that does not load."""
    problems = []
    for i, pool in enumerate(config.pools):
        if pool.picker is None or pool.picker.tokenizer is None:
            continue
        try:
            PromptTokenizer.load(base / pool.picker.tokenizer)
        except (TokenizerError, OSError) as exc:
            problems.append((f"pools[{i}].picker.tokenizer", str(exc)))
    return problems


def _data_path_note(config: Config) -> str:
    """What ``validate`` says of the data path: on, and why when the config's pools need it."""
    if not config.signals.data_path.on:
        return ""
    why = data_path_wanted(config)
    return f"; data path on ({why})" if why else "; data path on"
