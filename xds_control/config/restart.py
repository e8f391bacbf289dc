"""Settings of a warm restart: what the control plane keeps on disk so that a restart publishes
the weights the engine had, not the base weight."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["RestartConfig"]


class RestartConfig(StrictModel):
    """How a restarted control plane avoids publishing weights its engine has not computed."""

    state_file: Path | None = Field(
        default=None,
        description="Where the engine's last endpoint states are kept (JSON, replaced atomically; "
        "relative paths are read from the config file's folder). Unset: a file named after the "
        "config's path in a private `xds-control-<uid>` folder of the system temp dir, which "
        "survives a process restart (kill, crash, OOM) but holds nothing an operator must "
        "protect. Only used with the weight engine on.",
    )
    save_state: bool = Field(
        default=True,
        description="Write the state file (at most once per reconcile, when a weight changed, "
        "and every `state_refresh_s`); off, every restart waits for signals instead.",
    )
    state_refresh_s: float = Field(
        default=10.0,
        gt=0,
        description="Rewrite the state file this often while weights hold still, so it is "
        "never older than `hold_s` (30 s by default), past which a restart ignores it.",
    )
    first_publish_wait_s: float = Field(
        default=5.0,
        ge=0,
        le=120,
        description="Without a usable state file, wait up to this long for signals the "
        "engine can decide from (a decode step, or an idle server, for every endpoint) before "
        "the first snapshot, so Envoy keeps the weights it runs meanwhile; two direct scrapes "
        "or one Prometheus query take well under it.",
    )
