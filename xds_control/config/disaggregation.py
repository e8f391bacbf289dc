"""A picker pool's prefill/decode disaggregation: when a request's prompt is prefilled on
another server than the one that decodes it, and how the two are told (docs/disaggregation.md).

The picker picks the decode server first (what each holds included), then the decider: a
prompt whose uncached tokens on that server reach ``threshold_tokens`` is prefilled on a
prefill server of the same pool, a shorter one where it is decoded. The hand-off is one per
pool: ``header`` names the prefill server to a sidecar on the decode server (llm-d's
``x-prefiller-host-port``), which runs both legs; ``legs`` has the picker run the prefill leg
itself and write what it returns into the decode request (vLLM's ``kv_transfer_params``).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from xds_control.config.strict import StrictModel

__all__ = ["Disaggregation", "Handoff"]


class Handoff(StrEnum):
    """How the decode server learns which server prefilled its request."""

    HEADER = "header"
    """``x-prefiller-host-port: IP:PORT`` on the request; a sidecar on the decode server
    (llm-d's) runs the prefill leg there, then the decode leg."""
    LEGS = "legs"
    """The picker runs the prefill leg, then writes its ``kv_transfer_params`` into the
    decode request's body; no sidecar."""


class Disaggregation(StrictModel):
    """Prefill on one server, decode on another, for prompts worth it."""

    handoff: Handoff = Field(
        description="How the decode server learns its prefill: `header` (llm-d's sidecar "
        "reads `x-prefiller-host-port` and runs both legs) or `legs` (the picker runs the "
        "prefill leg and writes its `kv_transfer_params` into the decode request; no sidecar).",
    )
    threshold_tokens: int = Field(
        default=512,
        ge=0,
        le=10_000_000,
        description="The decider: a request is prefilled elsewhere when at least this many of "
        "its prompt tokens are not cached on the decode server the picker chose; fewer are "
        "prefilled there. 0: every request with a prefill server to go to.",
    )
