"""xdsctl against a live control plane and a real Envoy: status SYNCED, NACKED with Envoy's
words after a route table it rejects, SYNCED again after the fix, and diff empty when in sync
and naming the rejected table when not; with the weight engine on, `weights --explain` adds up
to the weights Envoy runs, and every query of the Grafana dashboard names an exported metric."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.engine_stack import SimStack, engine_config, sim_stack
from e2e.envoy_metrics import ENVOY_METRICS
from e2e.stack import BOTH_PROTOCOLS, EchoStack, eventually, weighted_config
from e2e.test_rejection_and_restart import OVERSIZED

XDSCTL = Path(sys.executable).with_name("xdsctl")
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "xds-control.json"
TYPES = ("CDS", "LDS", "EDS", "RDS")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


async def xdsctl(server: str, *args: str) -> Result:
    process = await asyncio.create_subprocess_exec(
        str(XDSCTL),
        "--server",
        server,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())


async def status_of(stack: EchoStack, node: str = "envoy-0") -> dict[str, str]:
    result = await xdsctl(stack.control_plane.admin_url, "-o", "json", "status")
    assert result.code == 0, result.stderr
    rows = [r for r in json.loads(result.stdout) if r["name"] == node]
    return rows[0] if rows else {}


@BOTH_PROTOCOLS
async def test_status_and_diff_through_a_rejected_route_table(stack: EchoStack) -> None:
    await stack.start(weighted_config(stack, [10, 10]))
    server, envoy = stack.control_plane.admin_url, stack.envoys[0]

    async def synced() -> bool:
        row = await status_of(stack)
        return bool(row) and all(row[t] == "SYNCED" for t in TYPES)

    await eventually(synced, what="xdsctl status to show every type SYNCED")
    same = await xdsctl(server, "diff", "envoy-0", "--envoy-admin", envoy.admin_url)
    assert (same.code, same.stdout.strip()) == (
        0,
        "envoy-0: in sync with what the control plane serves",
    ), same.stderr

    stack.write_config(
        weighted_config(
            stack, [10, 10], match={"headers": [{"name": "x-tenant", "regex": OVERSIZED}]}
        )
    )

    async def nacked() -> bool:
        return (await status_of(stack)).get("RDS") == "NACKED"

    await eventually(nacked, what="xdsctl status to show RDS NACKED")
    row = await status_of(stack)
    assert row["nack"].startswith("RDS: ")
    assert "max program size" in row["nack"]
    assert (row["CDS"], row["EDS"], row["LDS"]) == ("SYNCED", "SYNCED", "SYNCED")
    different = await xdsctl(
        server, "-o", "json", "diff", "envoy-0", "--envoy-admin", envoy.admin_url
    )
    assert different.code == 3, different.stderr
    found = json.loads(different.stdout)
    rds = [d for d in found if d["type"] == "RDS"]
    assert {d["problem"] for d in rds if d["name"]} == {"content differs"}, found
    assert any("max program size" in d["problem"] for d in rds if not d["name"]), found
    assert {d["type"] for d in found} == {"RDS"}, found

    stack.write_config(weighted_config(stack, [10, 10]))
    await eventually(synced, what="xdsctl status to show SYNCED again after the fix")
    fixed = await xdsctl(server, "diff", "envoy-0", "--envoy-admin", envoy.admin_url)
    assert fixed.code == 0, fixed.stdout


FAST_PATH = {"scrape": {"enabled": True, "interval_s": 0.25}, "reconcile_period_s": 0.5}


@pytest.fixture
async def engine_stack(tmp_path: Path) -> AsyncIterator[SimStack]:
    stack = sim_stack(tmp_path, profiles=["vllm-h100", "vllm-l4"])
    try:
        yield stack
    finally:
        await stack.close()


def exported(metrics_text: str) -> set[str]:
    """Every series name a query may use: families and their samples' names."""
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics_text):
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        names |= {sample.name for sample in family.samples}
    return names


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return exprs + [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]


def dashboard_metrics(prefix: str) -> set[str]:
    """Every metric name with ``prefix`` a query names (a label matcher such as
    ``envoy_x="y"`` or a label grouped by is not a metric)."""
    pattern = rf"\b({prefix}[a-z0-9_]+)\b(?!\s*(?:=|!=))"
    grouping = re.compile(r"\b(?:by|without)\s*\([^)]*\)")  # label names, not metrics
    return {m for e in dashboard_queries() for m in re.findall(pattern, grouping.sub("", e))}


def test_dashboard_queries_only_envoy_metrics_a_real_envoy_test_reads() -> None:
    # Each name in ENVOY_METRICS (docs/limits.md) is read from a real Envoy's /stats/prometheus
    # by test_priority_limits; anything else the dashboard asks Envoy for may not exist.
    envoy = dashboard_metrics("envoy_")
    assert envoy, "the dashboard lost its rate-limit admissions panel"
    assert envoy <= ENVOY_METRICS, f"not shown to exist in Envoy: {envoy - ENVOY_METRICS}"
    assert all(re.search(r"\b(xds_control|envoy)_", e) for e in dashboard_queries())


async def test_xdsctl_weights_explain_adds_up_and_dashboard_metrics_exist(
    engine_stack: SimStack,
) -> None:
    stack = engine_stack
    await stack.start(engine_config(stack, signals=FAST_PATH, weights={"max_num_seqs": 4}))
    server = stack.control_plane.admin_url
    names = {a: n for n, a in stack.backends.addresses.items()}

    async def explained() -> dict[str, dict[str, Any]]:  # the JSON view
        result = await xdsctl(server, "-o", "json", "weights", "chat", "--explain")
        assert result.code == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["engine"] is True
        return {names[d["address"]]: d for d in data["pools"]["chat"]}

    async def envoy_runs_the_explained_weights() -> bool:
        decisions = await explained()
        running = await stack.envoy_weights()
        return bool(decisions) and {n: d["weight"] for n, d in decisions.items()} == running

    await eventually(envoy_runs_the_explained_weights, what="Envoy to run the explained weights")
    for name, d in (await explained()).items():
        factors = d["factors"]
        assert isinstance(factors, dict)
        assert math.isclose(math.prod(factors.values()), d["score"], rel_tol=1e-4), (name, d)
        assert math.isclose(100 * d["score"] * d["warmup"], d["target"], abs_tol=0.01), d
        assert 1 <= d["weight"] <= 100
    assert (await explained())["s0"]["inputs"], "explain shows no signal input"

    metrics = await stack.control_plane.metrics()
    missing = dashboard_metrics("xds_control_") - exported(metrics)
    assert not missing, f"the dashboard queries metrics the server does not export: {missing}"
    with_samples = {s.name for f in text_string_to_metric_families(metrics) for s in f.samples}
    for name in (
        "xds_control_endpoint_weight",
        "xds_control_endpoint_weight_factor",
        "xds_control_signal_age_seconds",
        "xds_control_connected_streams",
        "xds_control_push_ack_seconds_count",
    ):
        assert name in with_samples, f"{name} has no series"
