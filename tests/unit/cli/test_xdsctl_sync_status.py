"""proxy-status's verdict per type, as istioctl words it, from one stream's type state: the
rule the admin API applies (``/v1/streams`` carries it), and the rows xdsctl prints from it."""

from __future__ import annotations

from typing import Any

import pytest

from xds_control.admin.sync import sync_status
from xds_control.cli.xdsctl.proxy_status import rows


def state(*, sent: str, acked: str = "", nacked: str = "") -> dict[str, Any]:
    return {"sent_version": sent, "acked_version": acked, "nacked_version": nacked}


@pytest.mark.parametrize(
    ("type_state", "expected"),
    [
        (None, "NOT SENT"),
        (state(sent="v2", acked="v2"), "SYNCED"),
        (state(sent="v2"), "STALE"),  # sent, no answer yet
        (state(sent="v2", acked="v1"), "STALE"),  # an older version is in use
        (state(sent="v2", acked="v1", nacked="v2"), "NACKED"),
        # v1 was rejected, v2 is out and not answered yet: not known to be rejected.
        (state(sent="v2", acked="v0", nacked="v1"), "STALE"),
        # v1 was rejected, then v2 was accepted: in sync.
        (state(sent="v2", acked="v2", nacked="v1"), "SYNCED"),
    ],
    ids=["not-sent", "synced", "awaiting", "behind", "nacked", "nacked-then-newer", "recovered"],
)
def test_sync_status_against_served_v2(type_state: dict[str, Any] | None, expected: str) -> None:
    assert sync_status(type_state, served="v2") == expected


def test_rows_compare_each_type_with_what_is_served() -> None:
    snapshot = {
        "types": [
            {"type": "CDS", "version": "c1"},
            {"type": "EDS", "version": "e2"},
            {"type": "LDS", "version": "l1"},
            {"type": "RDS", "version": "r1"},
        ]
    }
    served = {t["type"]: t["version"] for t in snapshot["types"]}
    types = [
        {"type": "CDS", **state(sent="c1", acked="c1")},
        {"type": "EDS", **state(sent="e2", acked="e1")},
    ]
    # As /v1/streams gives them: each type judged against what the stream's group is served.
    for t in types:
        t["sync"] = sync_status(t, served=served[t["type"]])
    streams = [{"node_id": "envoy-a", "node_cluster": "edge", "types": types}]
    assert rows(streams) == [
        {
            "name": "envoy-a",
            "cluster": "edge",
            "group": "",
            "CDS": "SYNCED",
            "LDS": "NOT SENT",
            "EDS": "STALE",
            "RDS": "NOT SENT",
            "nack": "",
        }
    ]
