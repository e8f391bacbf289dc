"""How the config and endpoints files are watched: the quiet window and the longest wait."""

from __future__ import annotations

from pydantic import Field, model_validator

from xds_control.config.strict import StrictModel

__all__ = ["WatchConfig"]


class WatchConfig(StrictModel):
    """File events wake the control loop; a burst of them (an editor's save, a ConfigMap swap,
    a script rewriting endpoints) becomes one push."""

    enabled: bool = Field(
        default=True,
        description="Watch the folders of the config and endpoints files (inotify) and reconcile "
        "on a change. Off, or when the watcher cannot start, files are read once per "
        "`signals.reconcile_period_s`, as a fallback.",
    )
    debounce_ms: int = Field(
        default=10,
        ge=1,
        le=5_000,
        description="Quiet window: reconcile once no event came for this long (twice as long "
        "once a second change shows a burst under way). 10 ms covers an editor's "
        "write-rename-chmod sequence (about 1 ms) and a script's burst of rewrites, and keeps "
        "an edit's way to Envoy within 50 ms.",
    )
    max_delay_ms: int = Field(
        default=200,
        ge=1,
        le=60_000,
        description="Reconcile at the latest this long after the first event of a burst, even "
        "if events keep coming, so a file rewritten in a tight loop still reaches Envoy.",
    )

    @model_validator(mode="after")
    def _window_fits(self) -> WatchConfig:
        if self.max_delay_ms < self.debounce_ms:
            raise ValueError("max_delay_ms must be at least debounce_ms")
        return self
