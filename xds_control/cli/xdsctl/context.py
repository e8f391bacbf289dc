"""What every xdsctl command gets: the output settings and an admin client."""

from __future__ import annotations

from xds_control.cli.app import App, OutputFormat
from xds_control.cli.xdsctl.client import AdminClient

__all__ = ["XdsctlApp"]


class XdsctlApp(App):
    """``App`` plus the control plane to talk to."""

    def __init__(self, *, output: OutputFormat, client: AdminClient) -> None:
        super().__init__(output=output)
        self.client = client
