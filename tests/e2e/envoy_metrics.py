"""The Envoy metrics the Grafana dashboard may query: the table in docs/limits.md ("Seeing it").

test_priority_limits reads each of them from a real Envoy's /stats/prometheus, so a name in
that table is one Envoy really exports; the dashboard test allows no other Envoy metric.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["ENVOY_METRICS", "PREFIX_LABEL"]

_DOC = Path(__file__).resolve().parents[2] / "docs" / "limits.md"

PREFIX_LABEL = "envoy_local_http_ratelimit_prefix"
"""The label Envoy's tag extraction gives the local rate limit's stat prefix."""

ENVOY_METRICS = frozenset(
    re.findall(r"^\| `(envoy_[a-z0-9_]+)` \|", _DOC.read_text(encoding="utf-8"), re.MULTILINE)
)
