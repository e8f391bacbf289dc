"""Admin: the HTTP endpoints operators and xdsctl read."""

from xds_control.admin.http import AdminServer
from xds_control.admin.protocol import AdminViews

__all__ = ["AdminServer", "AdminViews"]
