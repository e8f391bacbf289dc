"""What an inference server does in a disaggregated pool: prefill, decode, or both.

With prefill/decode disaggregation a request's prompt is prefilled on one server and its
tokens decoded on another, the KV cache handed over between them (docs/disaggregation.md).
A server's role comes from the config (an endpoint entry's ``role``), from discovery files
and from the pod label llm-d's deployments already carry (``llm-d.ai/role``). A server with
no role does both, as every server of an aggregated pool does.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ROLE_LABEL", "Role", "role_of_label"]

ROLE_LABEL = "llm-d.ai/role"
"""The pod label llm-d's charts put on each vLLM pod: ``prefill``, ``decode`` or both."""


class Role(StrEnum):
    """A server's part in a disaggregated pool."""

    PREFILL = "prefill"
    """Prefills prompts for other servers to decode; named only as a prefill destination."""
    DECODE = "decode"
    """Decodes; prefills what the decider keeps local (a short or cached prompt)."""
    BOTH = "both"
    """Prefills and decodes: every server of an aggregated pool."""

    @property
    def decodes(self) -> bool:
        """It may be a request's (decode) destination."""
        return self is not Role.PREFILL

    @property
    def prefills(self) -> bool:
        """It may prefill for another server."""
        return self is not Role.DECODE


_LABEL_VALUES = {
    "prefill": Role.PREFILL,
    "decode": Role.DECODE,
    "both": Role.BOTH,
    "prefill-decode": Role.BOTH,
}


def role_of_label(value: str | None) -> Role | None:
    """The role a pod label value names (llm-d's spellings: ``prefill``, ``decode``,
    ``both``, ``prefill-decode``; case and surrounding blanks ignored); ``None`` for no
    label or a value it does not name (the caller logs it and keeps the default)."""
    if value is None:
        return None
    return _LABEL_VALUES.get(value.strip().lower())
