"""A node group's gateway fleet counted from its Service's EndpointSlices, as every replica
reads them (the local list/watch API): ready gateways count, a not-ready or terminating one
does not, a slice's change is followed; and a fixed count is what it says."""

from __future__ import annotations

from pathlib import Path

from component.discovery.fake_kube_api import FakeKubeApi, endpoint, endpoint_slice
from component.discovery.polling import until
from xds_control.config import GatewayFleet
from xds_control.discovery import FleetSize, follow_fleets


async def test_ready_gateways_of_the_service_are_the_fleet(
    api: FakeKubeApi, tmp_path: Path
) -> None:
    settings = GatewayFleet.model_validate(
        {
            "kubernetes": {
                "namespace": "llm",
                "service": "gateway",
                "kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")),
                "relist_backoff_s": 0.05,
            }
        }
    )
    gateways = [
        endpoint("10.9.0.1"),
        endpoint("10.9.0.2"),
        endpoint("10.9.0.3", ready=False),
        endpoint("10.9.0.4", ready=False, serving=True, terminating=True),
    ]
    await api.apply(endpoint_slice("gateway-a", service="gateway", port=80, endpoints=gateways))
    size = FleetSize(settings, key="gateways/default", wake=lambda: None)
    try:
        assert await until(size, lambda n: n > 0) == 2
        await api.apply(
            endpoint_slice(
                "gateway-b", service="gateway", port=80, endpoints=[endpoint("10.9.1.1")]
            )
        )
        assert await until(size, lambda n: n != 2) == 3
        assert api.lists == 1  # the new slice through the watch
    finally:
        await size.close()


async def test_a_fixed_count_and_an_unchanged_setting_keeps_its_reader() -> None:
    three = GatewayFleet(count=3)
    kept = follow_fleets({}, {"edge": three}, wake=lambda: None)
    assert await kept["edge"].fetch() == 3
    again = follow_fleets(kept, {"edge": GatewayFleet(count=3)}, wake=lambda: None)
    assert again["edge"] is kept["edge"]
    changed = follow_fleets(again, {"edge": GatewayFleet(count=4)}, wake=lambda: None)
    assert await changed["edge"].fetch() == 4
    assert follow_fleets(changed, {}, wake=lambda: None) == {}
