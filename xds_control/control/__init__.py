"""Control: the orchestrator. The loop (``loop.py``) and the reconcile step it runs
(``reconcile.py``), and what only they need: the weigher that runs the engine's cycle
(``weigher.py``), its warm start and state file across restarts (``warm_start.py``), the
watch that wakes the loop on a file edit (``watch.py``) and the loop's metrics. What it
orchestrates lives in its own stage: sources in ``discovery``, signals in ``signals``, the
weight rule in ``engine``, budgets in ``limits``, resources in ``xds``."""

from xds_control.control.loop import ControlLoop, LoopState
from xds_control.control.reconcile import (
    ReconcileInputs,
    fleet_version,
    group_config,
    reconcile_groups,
    reconcile_once,
)
from xds_control.control.weigher import EngineView, Weigher, targets_of

__all__ = [
    "ControlLoop",
    "EngineView",
    "LoopState",
    "ReconcileInputs",
    "Weigher",
    "fleet_version",
    "group_config",
    "reconcile_groups",
    "reconcile_once",
    "targets_of",
]
