"""Faults a simulated server can be told to show at run time, and how they are described.

The state is plain data read by the scheduler and the HTTP layer; ``FaultUpdate`` is what the
control endpoint and the CLI send. Refusing connections and restarting need the listener, so the
server acts on them; everything else is read where it applies.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FaultState", "FaultUpdate", "parse_fault_assignments"]


class FaultUpdate(BaseModel):
    """A change to a server's faults; fields left out stay as they are."""

    model_config = ConfigDict(extra="forbid")

    slowdown: float | None = Field(None, ge=1.0, description="Multiply every step time by this.")
    error_rate: float | None = Field(None, ge=0.0, le=1.0, description="Fraction answered 500.")
    refuse: bool | None = Field(None, description="Close the listener: connections are refused.")
    hang: bool | None = Field(None, description="Accept requests but answer nothing, ever.")
    memory_creep_mib_per_s: float | None = Field(
        None, ge=0.0, description="GPU memory leaked per second, seen in DCGM and Triton gauges."
    )
    restart: float | None = Field(
        None,
        ge=0.0,
        description="Restart now: drop in-flight work, refuse for this many seconds, "
        "come back with a cold cache and reset counters.",
    )


class FaultState:
    """The faults currently in force on one server."""

    def __init__(self) -> None:
        self.slowdown = 1.0
        self.error_rate = 0.0
        self.refuse = False
        self.memory_creep_mib_per_s = 0.0
        self._creep_since = time.monotonic()
        self._creep_base_mib = 0.0
        # Set while the server is *not* hung, so waiting on it is free in the normal case.
        self.running = asyncio.Event()
        self.running.set()

    @property
    def hang(self) -> bool:
        """True while the server accepts requests and answers nothing."""
        return not self.running.is_set()

    def leaked_mib(self) -> float:
        """GPU memory leaked so far by a memory-creep fault."""
        return self._creep_base_mib + self.memory_creep_mib_per_s * (
            time.monotonic() - self._creep_since
        )

    def apply(self, update: FaultUpdate) -> None:
        """Apply the fields set in ``update`` (``restart`` is the server's job)."""
        if update.slowdown is not None:
            self.slowdown = update.slowdown
        if update.error_rate is not None:
            self.error_rate = update.error_rate
        if update.refuse is not None:
            self.refuse = update.refuse
        if update.hang is not None:
            if update.hang:
                self.running.clear()
            else:
                self.running.set()
        if update.memory_creep_mib_per_s is not None:
            self._creep_base_mib = self.leaked_mib()
            self._creep_since = time.monotonic()
            self.memory_creep_mib_per_s = update.memory_creep_mib_per_s

    def clear(self) -> None:
        """Back to a healthy server; leaked memory is returned."""
        self.slowdown = 1.0
        self.error_rate = 0.0
        self.refuse = False
        self.running.set()
        self.memory_creep_mib_per_s = 0.0
        self._creep_base_mib = 0.0
        self._creep_since = time.monotonic()

    def describe(self) -> dict[str, object]:
        """The current faults as JSON-ready data."""
        return {
            "slowdown": self.slowdown,
            "error_rate": self.error_rate,
            "refuse": self.refuse,
            "hang": self.hang,
            "memory_creep_mib_per_s": self.memory_creep_mib_per_s,
            "leaked_mib": round(self.leaked_mib(), 3),
        }


def parse_fault_assignments(items: list[str]) -> FaultUpdate:
    """Turn CLI ``name=value`` strings into a validated ``FaultUpdate``."""
    data: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            # A bare flag name switches a boolean fault on: ``--fault hang``.
            value = "true"
        data[name.strip().replace("-", "_")] = value.strip()
    return FaultUpdate.model_validate(data)
