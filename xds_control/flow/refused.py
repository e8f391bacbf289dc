"""Flow control's refusal of a request, with the status and reason the client is told."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RETRY_AFTER_S", "Refused"]

RETRY_AFTER_S = 1
"""The ``retry-after`` of a refusal: the queues move in well under a second when they move."""


@dataclass(frozen=True)
class Refused(Exception):
    """A request refused: ``status`` 429 (``queue-full``, ``max-wait``, ``token-budget``) or
    503 (``no-ready-endpoint``: it waited ``max_wait_s`` for a pool with no ready server)."""

    status: int
    reason: str
    retry_after_s: int = RETRY_AFTER_S
