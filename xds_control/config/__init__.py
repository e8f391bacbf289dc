"""Config: the pydantic model of pools, listeners and routes, read from YAML and the env."""

from xds_control.config.address import HostPort, parse_host_port
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
    RetryPolicy,
    Route,
    RouteMatch,
)
from xds_control.config.root import ENV_PREFIX, Config

__all__ = [
    "ENV_PREFIX",
    "CircuitBreakers",
    "Config",
    "EndpointConfig",
    "Engine",
    "HashKey",
    "HeaderMatch",
    "HostPort",
    "LbPolicy",
    "Listener",
    "LoadBalancing",
    "OutlierDetection",
    "Pool",
    "RetryPolicy",
    "Route",
    "RouteMatch",
    "load_config",
    "parse_config",
    "parse_host_port",
]
