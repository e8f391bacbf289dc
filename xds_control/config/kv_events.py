"""Where a pool's servers publish their KV-cache events (docs/kv-events.md), and how long
their silence is believed.

A pool with ``kv_events`` set is subscribed to: on every server, a ZMQ SUB socket on the event
port and a DEALER on the replay port, as vLLM's ``--kv-events-config`` publisher serves them.
An endpoint's own ``kv_events`` (in the config, or a Kubernetes pod's annotations or named
container ports) names ports other than the pool's.
"""

from __future__ import annotations

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["KvEventPorts", "KvEventsConfig"]


class KvEventPorts(StrictModel):
    """One server's event ports, when they are not its pool's."""

    port: int = Field(ge=1, le=65_535, description="The server's PUB socket (vLLM's `endpoint`).")
    replay_port: int | None = Field(
        default=None,
        ge=1,
        le=65_535,
        description="Its ROUTER replay socket (vLLM's `replay_endpoint`); unset: the pool's "
        "`replay_port`.",
    )


class KvEventsConfig(StrictModel):
    """Subscribe to a pool's KV-cache events."""

    port: int = Field(
        default=5557,
        ge=1,
        le=65_535,
        description="The servers' PUB socket, on each server's own IP: vLLM's default "
        "`tcp://*:5557`.",
    )
    replay_port: int | None = Field(
        default=5558,
        ge=1,
        le=65_535,
        description="The servers' ROUTER replay socket (vLLM publishes one only when "
        "`replay_endpoint` is set; 5558 is the port its examples use). Null: no replay, so a "
        "sequence gap clears the server's blocks.",
    )
    topic: str = Field(
        default="",
        description="The topic the servers publish under (vLLM's `topic`, empty by default); "
        "subscribed to as a prefix.",
    )
    replay_timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="How long a replay may take to answer. A hole in what it brought (the "
        "server drops answers a slow reader has not taken) is asked for again; what the "
        "server's replay buffer no longer holds counts as lost (its blocks are then cleared "
        "and rebuilt from what follows).",
    )
    stale_after_s: float = Field(
        default=10.0,
        gt=0,
        le=3_600,
        description="A server that is healthy and running requests but has published nothing "
        "for this long is marked stale (the protocol has no heartbeat: an idle server is "
        "silent and not stale).",
    )
