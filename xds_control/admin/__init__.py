"""Admin: the HTTP endpoints operators and xdsctl read."""

from xds_control.admin.http import AdminServer

__all__ = ["AdminServer"]
