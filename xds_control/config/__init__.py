"""Config: the pydantic model of pools, listeners and routes, read from YAML and the env."""

from xds_control.config.address import HostPort, parse_host_port
from xds_control.config.classes import Classify, TokenRange
from xds_control.config.data_path import data_path_wanted, resolve_data_path
from xds_control.config.engine_of import (
    PER_REQUEST_STEP,
    NamesEngine,
    engine_of,
    measures_comparable,
)
from xds_control.config.gateways import GatewayFleet
from xds_control.config.groups import DEFAULT_GROUP, DefaultGroup, NodeGroup, NodeMatch
from xds_control.config.kv_events import KvEventPorts, KvEventsConfig
from xds_control.config.limits import (
    AdaptPolicy,
    ClassRate,
    HighPriorityBreakers,
    Limits,
    PriorityClass,
)
from xds_control.config.load import load_config, parse_config
from xds_control.config.model import (
    CircuitBreakers,
    EndpointConfig,
    Engine,
    HashKey,
    HeaderMatch,
    LbPolicy,
    Listener,
    LoadBalancing,
    OutlierDetection,
    Pool,
    PoolShare,
    RetryPolicy,
    Route,
    RouteMatch,
)
from xds_control.config.restart import RestartConfig
from xds_control.config.roles import ROLE_LABEL, Role, role_of_label
from xds_control.config.root import ENV_PREFIX, Config, gateway_fleets, group_names
from xds_control.config.signals import DataPathConfig, EndpointMapping, ScrapeConfig, SignalsConfig
from xds_control.config.weights import EngineBaseWeights, HealthPolicy, WeightPolicy

__all__ = [
    "DEFAULT_GROUP",
    "ENV_PREFIX",
    "PER_REQUEST_STEP",
    "ROLE_LABEL",
    "AdaptPolicy",
    "CircuitBreakers",
    "ClassRate",
    "Classify",
    "Config",
    "DataPathConfig",
    "DefaultGroup",
    "EndpointConfig",
    "EndpointMapping",
    "Engine",
    "EngineBaseWeights",
    "GatewayFleet",
    "HashKey",
    "HeaderMatch",
    "HealthPolicy",
    "HighPriorityBreakers",
    "HostPort",
    "KvEventPorts",
    "KvEventsConfig",
    "LbPolicy",
    "Limits",
    "Listener",
    "LoadBalancing",
    "NamesEngine",
    "NodeGroup",
    "NodeMatch",
    "OutlierDetection",
    "Pool",
    "PoolShare",
    "PriorityClass",
    "RestartConfig",
    "RetryPolicy",
    "Role",
    "Route",
    "RouteMatch",
    "ScrapeConfig",
    "SignalsConfig",
    "TokenRange",
    "WeightPolicy",
    "data_path_wanted",
    "engine_of",
    "gateway_fleets",
    "group_names",
    "load_config",
    "measures_comparable",
    "parse_config",
    "parse_host_port",
    "resolve_data_path",
    "role_of_label",
]
