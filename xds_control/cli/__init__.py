"""Command-line interfaces: `xds-control` and `xdsctl`."""
