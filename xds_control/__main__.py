"""``python -m xds_control`` is ``xds-control``."""

from xds_control.cli.main import app

app()
