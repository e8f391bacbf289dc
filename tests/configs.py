"""Configs several test files start from, written once."""

from __future__ import annotations

__all__ = ["ONE_POOL"]

ONE_POOL = """\
pools:
  - name: chat
    endpoints: [{address: 127.0.0.1:8001, weight: 10}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: all, pool: chat}]
"""
"""The smallest valid config: pool ``chat`` with one endpoint at weight 10 behind listener
``gateway``'s one route ``all``. Tests derive their variants with ``str.replace`` on it."""
