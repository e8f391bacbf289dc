"""Configs several test files start from, written once."""

from __future__ import annotations

__all__ = ["CHAT_AND_BATCH", "ONE_POOL"]

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

CHAT_AND_BATCH = """\
pools:
  - name: chat
    endpoints: [{address: 127.0.0.1:8001, weight: 10}, {address: 127.0.0.1:8002, weight: 30}]
  - name: batch
    endpoints: [{address: 127.0.0.1:8003}]
listeners:
  - name: gateway
    address: 127.0.0.1:10000
    routes: [{name: chat, pool: chat, match: {prefix: /chat}}, {name: rest, pool: batch}]
"""
"""Two pools behind one listener: ``chat`` (weights 10 and 30) on ``/chat``, ``batch`` for the
rest; what the admin API and xdsctl tests show."""
