"""What every command shares: output format and a clean way to fail."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, NoReturn

import typer
import yaml
from rich.console import Console

__all__ = ["App", "OutputFormat"]


class OutputFormat(StrEnum):
    """How commands print data."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


class App:
    """Carried in typer's context object by the root callback."""

    def __init__(self, *, output: OutputFormat = OutputFormat.TABLE) -> None:
        self.output = output
        self.console = Console(soft_wrap=True)
        self.err = Console(stderr=True, soft_wrap=True)

    def abort(self, message: str, code: int = 1) -> NoReturn:
        """Print ``message`` to stderr and exit with ``code``."""
        self.err.print(message, markup=False, highlight=False)
        raise typer.Exit(code)

    def print_data(self, data: Any) -> None:
        """Print ``data`` as JSON or YAML (tables are per command)."""
        if self.output is OutputFormat.YAML:
            self.console.print(yaml.safe_dump(data, sort_keys=False), end="", markup=False)
        else:
            self.console.print_json(json.dumps(data))
