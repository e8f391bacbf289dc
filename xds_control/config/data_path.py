"""Whether the data path is on: as the config says, or, left unset, when the fleet needs it.

Servers whose engine times a whole request (Triton, ONNX Runtime) and servers that time a
decode step (vLLM, SGLang) have no capacity in common unless Envoy's data path times them alike
(``engine/capacity.py``). Left unset, ``signals.data_path.enabled`` turns on exactly when the
config puts the two kinds side by side: in one pool (its engine and its endpoints' own), or
behind one route over several pools. Engines that discovery alone names (a pod's
``xds-control.io/engine`` label) are not known here: such a fleet sets it itself.
"""

from __future__ import annotations

from xds_control.config.engine_of import engine_of, measures_comparable
from xds_control.config.model import Engine, Pool
from xds_control.config.root import Config

__all__ = ["data_path_wanted", "resolve_data_path"]


def _engines(pool: Pool) -> set[Engine]:
    return {pool.engine, *(engine_of(pool, endpoint) for endpoint in pool.endpoints)}


def data_path_wanted(config: Config) -> str | None:
    """Why ``config`` needs the data path (a pool or route that mixes the two kinds of step
    time), or ``None``."""
    pools = {pool.name: pool for pool in config.pools}
    for pool in config.pools:
        engines = _engines(pool)
        if not measures_comparable(engines):
            return f"pool {pool.name} mixes {', '.join(sorted(engines))}"
    for listener in config.listeners:
        for route in listener.routes:
            engines = set()
            for name in route.pool_names():
                if name in pools:
                    engines |= _engines(pools[name])
            if not measures_comparable(engines):
                return f"route {listener.name}/{route.name} spans {', '.join(sorted(engines))}"
    return None


def resolve_data_path(config: Config) -> Config:
    """``config`` with ``signals.data_path.enabled`` decided: as given, else whether
    ``data_path_wanted``."""
    data_path = config.signals.data_path
    if data_path.enabled is not None:
        return config
    on = data_path_wanted(config) is not None
    signals = config.signals.model_copy(
        update={"data_path": data_path.model_copy(update={"enabled": on})}
    )
    return config.model_copy(update={"signals": signals})
