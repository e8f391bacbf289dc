"""The lab's one error: a real process it runs did not come up or misbehaved."""

from __future__ import annotations

__all__ = ["HarnessError"]


class HarnessError(Exception):
    """A process the lab starts (Envoy, Prometheus, ``xds-control serve``, a backend, the
    simulated fleet) did not come up, or answered what it must not."""
