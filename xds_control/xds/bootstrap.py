"""Envoy bootstrap: node identity and the way back to the control plane; all else over ADS."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["XDS_CLUSTER", "AdsVariant", "XdsTls", "build_bootstrap"]

XDS_CLUSTER = "xds_control"

AdsVariant = Literal["sotw", "delta"]
"""State of the world (``GRPC``) or incremental (``DELTA_GRPC``): the server speaks both."""


@dataclass(frozen=True)
class XdsTls:
    """How Envoy checks the control plane (``ca_file``) and proves who it is (``cert_file``
    and ``key_file``, for mutual TLS); paths as Envoy will see them."""

    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    """SNI, and the name the server's certificate must carry (a SAN DNS name); unset, any
    certificate from ``ca_file`` is accepted."""


def build_bootstrap(
    *,
    node_id: str,
    node_cluster: str,
    xds_host: str,
    xds_port: int,
    admin_port: int = 9901,
    discovery: Literal["static", "dns"] = "static",
    ads: AdsVariant = "sotw",
    xds_pipe: str | None = None,
    tls: XdsTls | None = None,
) -> dict[str, Any]:
    """A bootstrap (as a YAML/JSON-ready dict) for an Envoy that pulls everything over ADS.

    ``discovery="static"`` suits a sidecar (control plane on loopback); ``"dns"`` a gateway that
    reaches a central control plane through a Kubernetes Service name. ``ads="delta"`` makes
    Envoy use incremental xDS: only changed resources travel, and removals are explicit.
    ``xds_pipe`` (a Unix socket path) replaces host and port: a sidecar that no other process
    on the network can reach. ``tls`` adds an ``UpstreamTlsContext`` to the xDS cluster.
    """
    address: dict[str, Any] = (
        {"pipe": {"path": xds_pipe}}
        if xds_pipe is not None
        else {"socket_address": {"address": xds_host, "port_value": xds_port}}
    )
    cluster = _xds_cluster(address=address, dns=discovery == "dns" and xds_pipe is None, tls=tls)
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
                        "envoy_grpc": {
                            "cluster_name": XDS_CLUSTER,
                            # Reconnect quickly after a control-plane restart or a cut link
                            # (Envoy's default cap is 30 s). The xDS stream reads its back-off
                            # here; GrpcService.retry_policy is for other gRPC users.
                            "retry_policy": {
                                "retry_back_off": {"base_interval": "0.25s", "max_interval": "5s"}
                            },
                        }
                    }
                ],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {"clusters": [cluster]},
    }


def _xds_cluster(*, address: dict[str, Any], dns: bool, tls: XdsTls | None) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": XDS_CLUSTER,
        "type": "STRICT_DNS" if dns else "STATIC",
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
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
        },
    }
    if tls is not None:
        cluster["transport_socket"] = _tls_socket(tls)
    return cluster


def _tls_socket(tls: XdsTls) -> dict[str, Any]:
    validation: dict[str, Any] = {"trusted_ca": {"filename": tls.ca_file}}
    if tls.server_name is not None:
        validation["match_typed_subject_alt_names"] = [
            {"san_type": "DNS", "matcher": {"exact": tls.server_name}}
        ]
    common: dict[str, Any] = {"validation_context": validation, "alpn_protocols": ["h2"]}
    if tls.cert_file is not None and tls.key_file is not None:
        common["tls_certificates"] = [
            {
                "certificate_chain": {"filename": tls.cert_file},
                "private_key": {"filename": tls.key_file},
            }
        ]
    context: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "common_tls_context": common,
    }
    if tls.server_name is not None:
        context["sni"] = tls.server_name
    return {"name": "envoy.transport_sockets.tls", "typed_config": context}
