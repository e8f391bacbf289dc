"""The root of the config: pools, listeners and the control plane's own settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from xds_control.config.address import IpPort
from xds_control.config.gateways import GatewayFleet
from xds_control.config.groups import DEFAULT_GROUP, NodeGroup, UnknownNodes
from xds_control.config.inference_pools import InferencePoolsDiscovery
from xds_control.config.model import Listener, Pool
from xds_control.config.restart import RestartConfig
from xds_control.config.serving import GrpcConfig, TlsConfig, XdsAddress
from xds_control.config.signals import SignalsConfig
from xds_control.config.watch import WatchConfig

__all__ = ["ENV_PREFIX", "Config", "gateway_fleets", "group_names"]

ENV_PREFIX = "XDS_CONTROL_"


class Config(BaseSettings):
    """Everything xds-control serves. YAML gives the values; ``XDS_CONTROL_*`` env overrides them
    (nested with ``__``, e.g. ``XDS_CONTROL_MODEL_HEADER``)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    xds_address: XdsAddress = Field(
        default="0.0.0.0:18000",
        description="Where the ADS gRPC server listens: `IP:PORT` (all interfaces by default), "
        "or `unix:///path` for a sidecar next to its Envoy (mode from `grpc.socket_mode`).",
    )
    tls: TlsConfig | None = Field(
        default=None,
        description="TLS (mutual with `client_ca_file`) on the xDS port; unset: plaintext, "
        "for loopback, a Unix socket or a mesh that encrypts.",
    )
    grpc: GrpcConfig = Field(
        default_factory=GrpcConfig,
        description="Keepalive, stream limit and Unix-socket mode of the xDS server.",
    )
    admin_address: IpPort = Field(
        default="127.0.0.1:9902",
        description="Admin HTTP (/healthz, /readyz, /metrics, /v1/*); loopback by default since "
        "it is unauthenticated.",
    )
    admin_grpc_address: IpPort | None = Field(
        default=None,
        description="The typed admin API (gRPC, protos/xds_control/admin/v1/admin.proto), e.g. "
        "127.0.0.1:9903: a port of its own, apart from the xDS port Envoys reach; unset: off "
        "(the HTTP JSON mirror serves the same views).",
    )
    admin_token_file: Path | None = Field(
        default=None,
        description="File holding the bearer token both admin APIs require when bound off "
        "loopback (else env XDS_CONTROL_ADMIN_TOKEN); off loopback with no token, serve refuses "
        "to start.",
    )
    model_header: str = Field(
        default="x-model",
        min_length=1,
        description="Header that route `match.model` compares against.",
    )
    pools: tuple[Pool, ...] = Field(
        default=(),
        description="Pools of inference servers; at least one, unless `inference_pools` "
        "makes them.",
    )
    inference_pools: InferencePoolsDiscovery | None = Field(
        default=None,
        description="Pools made and removed at run time from the InferencePools of a "
        "Kubernetes namespace, one pool per object, named as it is; routes name them as any "
        "pool. Unset: the pools are the config's alone.",
    )
    listeners: tuple[Listener, ...] = Field(min_length=1, description="Envoy listeners.")
    signals: SignalsConfig = Field(
        default_factory=SignalsConfig,
        description="Where endpoint signals come from (Prometheus, direct scrape).",
    )
    restart: RestartConfig = Field(
        default_factory=RestartConfig,
        description="What a restart keeps of the weight engine (state file, first-publish wait).",
    )
    watch: WatchConfig = Field(
        default_factory=WatchConfig,
        description="Reconcile when the config or an endpoints file changes (debounced), not "
        "only every reconcile period.",
    )
    node_groups: tuple[NodeGroup, ...] = Field(
        default=(),
        description="Which listeners and pools each kind of Envoy gets, by node cluster, id or "
        "metadata; the first group that matches wins. Empty: one group, `default`, in which "
        "every Envoy gets everything.",
    )
    unknown_nodes: UnknownNodes = Field(
        default="refuse",
        description="With `node_groups`, what an Envoy that matches none gets: `refuse` (its "
        "stream ends with PERMISSION_DENIED naming its node id and cluster, and a log line says "
        "so), or `{group: NAME}`. Refusing by default keeps an Envoy from getting routes meant "
        "for another kind; ignored without `node_groups`.",
    )
    gateways: GatewayFleet | None = Field(
        default=None,
        description="The whole Envoy fleet, however many control-plane replicas it is spread "
        "over (central mode behind a Service): each budget is divided by its size (at least "
        "the Envoys connected here), so every replica hands out the same shares and the fleet "
        "admits its budget once. Unset: by the Envoys connected to this replica, right for one "
        "replica only. With `node_groups`, each group gives its own.",
    )
    control_planes: GatewayFleet | None = Field(
        default=None,
        description="The control-plane replicas whose pickers serve one fleet (central mode: "
        "this Service's ready endpoints, a headless name, or a count): each picker pool's "
        "token budgets (`pools[].picker.flow.budgets`) are divided by their number, so the "
        "replicas together hand out each budget at most once. Envoy's `ext_proc` "
        "connections reach the replicas through the Service, each replica a share of them: "
        "one that takes more than its share refuses sooner (docs/flow-control.md). Unset: "
        "one replica, the whole budget here.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file: operators override one value without editing YAML.
        return (env_settings, init_settings)

    def pool(self, name: str) -> Pool:
        """The pool called ``name``; ``KeyError`` when there is none."""
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def summary(self) -> dict[str, Any]:
        """Counts an operator checks first."""
        return {
            "pools": len(self.pools),
            "listeners": len(self.listeners),
            "routes": sum(len(listener.routes) for listener in self.listeners),
            "data_path": self.signals.data_path.on,
        }


def group_names(config: Config) -> tuple[str, ...]:
    """The groups ``config`` publishes a snapshot for, in config order."""
    if not config.node_groups:
        return (DEFAULT_GROUP,)
    return tuple(group.name for group in config.node_groups)


def gateway_fleets(config: Config) -> dict[str, GatewayFleet]:
    """Node group -> where its fleet's size comes from, for the groups that say."""
    if not config.node_groups:
        return {} if config.gateways is None else {DEFAULT_GROUP: config.gateways}
    return {g.name: g.gateways for g in config.node_groups if g.gateways is not None}
