"""The base of every config model: strict and immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """Strict, immutable config node: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)
