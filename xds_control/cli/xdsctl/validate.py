"""``xdsctl validate FILE``: the same check as ``xds-control validate``, from the operator's
tool (exit 2 with every error and its field path, 0 with a summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["command"]


def command(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(help="The config file.")],
) -> None:
    """Check a config file (and the endpoints files it names) as serve would load it."""
    # Imported here: the check builds the snapshots, so it brings in every stage, and the other
    # commands, which only ask the admin API, should not pay for that at start-up.
    from xds_control.cli import validate

    validate.command(ctx, file)
