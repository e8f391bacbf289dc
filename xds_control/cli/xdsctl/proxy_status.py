"""``xdsctl proxy-status``: the name istioctl users know; the same as ``xdsctl status``."""

from __future__ import annotations

from xds_control.cli.xdsctl.status import TYPES, command, rows

__all__ = ["TYPES", "command", "rows"]
