"""Routes to pools that do not exist (an InferencePool not created yet, or deleted): a route
none of whose pools exists answers 503 without naming a cluster, and a route over several
sends only to those that exist, so no route names a cluster Envoy is to drop."""

from __future__ import annotations

import yaml

from xds_control.config import parse_config
from xds_control.control import ReconcileInputs, reconcile_once
from xds_control.xds.routes import NO_POOL_STATUS

CONFIG = {
    "inference_pools": {"namespace": "llm"},
    "pools": [{"name": "own", "endpoints": [{"address": "10.0.0.1:8000"}]}],
    "listeners": [
        {
            "name": "gw",
            "address": "127.0.0.1:10000",
            "limits": {"classes": {"medium": {"rate_per_s": 10}}},
            "routes": [
                {"name": "gone", "pool": "llama", "match": {"prefix": "/llama"}},
                {"name": "split", "pools": [{"name": "own", "weight": 3}, {"name": "qwen"}]},
            ],
        }
    ],
}


def test_a_route_to_missing_pools_answers_503_and_names_only_pools_that_exist() -> None:
    config = parse_config(text=yaml.safe_dump(CONFIG))
    snapshot = reconcile_once(ReconcileInputs(config=config, endpoints={}))
    [table] = snapshot.route_configs.resources.values()
    assert table.references == {"own"}
    routes = {r.name: r for r in table.message.virtual_hosts[0].routes}
    for priority in ("critical", "high", "medium"):  # every class route, HIGH ones too
        gone = routes[f"gone/{priority}"]
        assert gone.direct_response.status == NO_POOL_STATUS
        assert not gone.HasField("route")
        split = routes[f"split/{priority}"].route.weighted_clusters.clusters
        assert [(c.name, c.weight.value) for c in split] == [("own", 3)]
