"""What the control plane says of an Envoy after a kill -9 and a restart with the same config:
the Envoy reconnects holding every version served, nothing is sent again, and yet `xdsctl
status` shows every type SYNCED and CSDS the version Envoy holds, on either xDS variant."""

from __future__ import annotations

from typing import Any

from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, weighted_config
from e2e.test_csds_envoy import csds
from e2e.test_xdsctl_envoy import TYPES, status_of


async def stream_types(stack: EchoStack) -> dict[str, dict[str, Any]]:
    """Type -> envoy-0's state in ``/v1/streams`` (empty while it is not connected)."""
    streams = await stack.control_plane.get_json("/v1/streams")
    [stream] = [s for s in streams if s["node_id"] == "envoy-0"] or [{"types": []}]
    return {t["type"]: t for t in stream["types"]}


async def all_synced(stack: EchoStack) -> bool:
    """Every type of envoy-0 SYNCED, as ``/v1/streams`` judges it (polled over HTTP: cheaper
    than starting the CLI each time; the CLI's verdict is asserted once, after)."""
    types = await stream_types(stack)
    return len(types) == len(TYPES) and all(t["sync"] == "SYNCED" for t in types.values())


@BOTH_PROTOCOLS
async def test_status_after_a_restart_is_synced_with_the_served_versions(
    stack: EchoStack,
) -> None:
    await stack.start(weighted_config(stack, [10, 30]))
    await eventually(lambda: all_synced(stack), what="every type SYNCED")
    served = {t: s["served_version"] for t, s in (await stream_types(stack)).items()}

    stack.control_plane.process.kill()  # kill -9
    await stack.control_plane.process.stop()
    await stack.restart_control_plane()
    # Envoy reconnects by itself (its retry back-off), and asks for each type in turn.
    await eventually(lambda: all_synced(stack), timeout=30, what="SYNCED after the restart")

    row = await status_of(stack)  # the real CLI, as an operator runs it
    assert {t: row[t] for t in TYPES} == dict.fromkeys(TYPES, "SYNCED"), row
    for short, state in (await stream_types(stack)).items():
        assert state["responses"] == 0, state  # Envoy had every version: nothing was resent
        assert state["served_version"] == served[short], (short, state, served)
        assert state["acked_version"] == state["sent_version"] == served[short], state
        assert state["acked_at"] > 0, state

    rows = await csds(stack)
    assert {kind for kind, _ in rows} == set(TYPES)
    for (kind, name), csds_row in rows.items():
        assert csds_row[:3] == ("SYNCED", "ACKED", served[kind]), (kind, name, csds_row)
