"""Envoy bootstrap: node identity and the way back to the control plane; all else over ADS."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["XDS_CLUSTER", "AdsVariant", "build_bootstrap"]

XDS_CLUSTER = "xds_control"

AdsVariant = Literal["sotw", "delta"]
"""State of the world (``GRPC``) or incremental (``DELTA_GRPC``): the server speaks both."""


def build_bootstrap(
    *,
    node_id: str,
    node_cluster: str,
    xds_host: str,
    xds_port: int,
    admin_port: int = 9901,
    discovery: Literal["static", "dns"] = "static",
    ads: AdsVariant = "sotw",
) -> dict[str, Any]:
    """A bootstrap (as a YAML/JSON-ready dict) for an Envoy that pulls everything over ADS.

    ``discovery="static"`` suits a sidecar (control plane on loopback); ``"dns"`` a gateway that
    reaches a central control plane through a Kubernetes Service name. ``ads="delta"`` makes
    Envoy use incremental xDS: only changed resources travel, and removals are explicit.
    """
    return {
        "node": {"id": node_id, "cluster": node_cluster},
        "admin": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}
        },
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC" if ads == "delta" else "GRPC",
                "transport_api_version": "V3",
                "set_node_on_first_message_only": True,
                "grpc_services": [
                    {
                        "envoy_grpc": {"cluster_name": XDS_CLUSTER},
                        # Reconnect quickly after a control-plane restart (default max is 30 s).
                        "retry_policy": {
                            "retry_back_off": {"base_interval": "0.25s", "max_interval": "5s"}
                        },
                    }
                ],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {
            "clusters": [
                {
                    "name": XDS_CLUSTER,
                    "type": "STATIC" if discovery == "static" else "STRICT_DNS",
                    "connect_timeout": "1s",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/"
                            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": {
                                "http2_protocol_options": {
                                    "connection_keepalive": {"interval": "30s", "timeout": "5s"}
                                }
                            },
                        }
                    },
                    "load_assignment": {
                        "cluster_name": XDS_CLUSTER,
                        "endpoints": [
                            {
                                "lb_endpoints": [
                                    {
                                        "endpoint": {
                                            "address": {
                                                "socket_address": {
                                                    "address": xds_host,
                                                    "port_value": xds_port,
                                                }
                                            }
                                        }
                                    }
                                ]
                            }
                        ],
                    },
                }
            ]
        },
    }
