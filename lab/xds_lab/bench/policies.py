"""The policies the suite compares: Envoy's own balancing, ours (engine weights), and the
"ideal" reference (exact knowledge, no Envoy: ``ideal.py``).

``picker`` is the per-request endpoint picker (issue 16, ``docs/picker.md``): the pool gets
``picker`` on the control plane's free picker port, and Envoy's fallback is MAGLEV with the
engine's weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Literal

from xds_lab.harness.pool_config import POOL, one_pool_config

__all__ = ["DEFAULT_POLICIES", "POLICIES", "Policy", "control_plane_config"]


@dataclass(frozen=True, slots=True)
class Policy:
    """An Envoy LB policy, optionally with a bounded load, with or without engine weights;
    or a router that is not Envoy (``via``)."""

    name: str
    lb: str
    _: KW_ONLY
    hash_balance_factor: int | None = None
    engine_weights: bool = False
    active_request_bias: float | None = None
    """LEAST_REQUEST only; None leaves the control plane's default."""
    batch_slots: bool = True
    """List each endpoint's batch slots in the config; False is a new user's config (the engine
    then assumes the pool's ``max_num_seqs`` for every server)."""
    via: Literal["envoy", "ideal", "picker"] = "envoy"
    """``ideal``: the load generator routes with exact knowledge (no Envoy); ``picker``: Envoy
    asks the control plane's per-request picker, ``lb`` with engine weights as its fallback."""
    kv_events: bool = False
    """``picker`` only: the picker reads what the servers hold from their KV-cache events,
    with the lab's tokenizer (issue 24); else from where it sent prompts."""

    @property
    def through_envoy(self) -> bool:
        """Requests go through Envoy and the control plane (all but the ideal reference)."""
        return self.via != "ideal"

    @property
    def ours(self) -> bool:
        """Weights (and, for ``picker``, picks) come from the control plane, not static
        equal weights."""
        return self.engine_weights and self.through_envoy

    @property
    def reference(self) -> bool:
        """A bound, not a contender: left out of "ours" and "Envoy's best" alike."""
        return self.via == "ideal"


POLICIES: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("round_robin", "round_robin"),
        Policy("least_request", "least_request"),
        Policy("maglev", "maglev"),
        # 150% of the average: Envoy's documented example value for bounded load.
        Policy("maglev_bounded", "maglev", hash_balance_factor=150),
        Policy("maglev_weights", "maglev", engine_weights=True),
        Policy("least_request_weights", "least_request", engine_weights=True),
        Policy("ideal", "none", via="ideal"),
        # The per-request picker, with weighted MAGLEV as Envoy's fallback (issue 16).
        Policy("picker", "maglev", engine_weights=True, via="picker"),
        # The same, knowing what each server holds from its KV-cache events (issue 24).
        Policy("picker_events", "maglev", engine_weights=True, via="picker", kv_events=True),
        # Investigation variants (docs/benchmarks.md): Envoy's own bias, and weights alone.
        Policy(
            "least_request_weights_bias1",
            "least_request",
            engine_weights=True,
            active_request_bias=1.0,
        ),
        Policy(
            "least_request_weights_bias0",
            "least_request",
            engine_weights=True,
            active_request_bias=0.0,
        ),
        Policy(
            "least_request_weights_noslots", "least_request", engine_weights=True, batch_slots=False
        ),
        Policy("maglev_weights_noslots", "maglev", engine_weights=True, batch_slots=False),
    )
}

DEFAULT_POLICIES = (
    "round_robin",
    "least_request",
    "maglev",
    "maglev_bounded",
    "maglev_weights",
    "least_request_weights",
    "picker",
    "ideal",
)
"""What a scenario runs unless it lists its own policies."""


def control_plane_config(
    *,
    policy: Policy,
    batch_slots: Mapping[str, int],
    listener_port: int,
    picker_address: str | None = None,
    engines: Mapping[str, str] | None = None,
    signals: Mapping[str, Any] | None = None,
    streamed_route: bool = False,
    kv_events: Mapping[str, tuple[int, int]] | None = None,
    tokenizer: str | None = None,
) -> dict[str, Any]:
    """One vLLM pool over the servers of ``batch_slots`` (address -> the server's
    ``max_num_seqs``) behind one listener, balanced by ``policy``; a ``picker`` policy serves
    its picker at ``picker_address`` (required then), with the picker's defaults. ``engines``
    (address -> engine) sets the ``engine`` of each endpoint that is not vLLM, the pool's.
    ``signals`` (a scenario's) replaces sections of the engine-weighted policies' ``signals``.
    ``streamed_route`` puts the classifier on the listener and a route for streamed requests
    before the catch-all one, both with their default retries. A ``kv_events`` policy
    subscribes to the servers of ``kv_events`` (address -> its PUB and replay ports) and gives
    the picker ``tokenizer``.

    Engine weights turn on the direct-scrape fast path only; without them no signal is read
    (the data path is turned off, which a pool mixing engines would otherwise turn on).
    ``pools[].weights`` is left out on purpose, so every scenario runs the engine's defaults.
    Batch slots are listed per endpoint as an operator would (vLLM does not export them);
    only the engine reads them.
    """
    lb: dict[str, Any] = {"policy": policy.lb}
    if policy.hash_balance_factor is not None:
        lb["hash_balance_factor"] = policy.hash_balance_factor
    if policy.active_request_bias is not None:
        lb["active_request_bias"] = policy.active_request_bias
    pool: dict[str, Any] = {"engine": "vllm", "lb": lb}
    if policy.via == "picker":
        if picker_address is None:
            raise ValueError(f"policy {policy.name!r} needs a picker_address")
        pool["picker"] = {"address": picker_address}
    if policy.kv_events:
        if tokenizer is None or kv_events is None:
            raise ValueError(f"policy {policy.name!r} needs servers' KV events and a tokenizer")
        pool["picker"]["tokenizer"] = tokenizer
        pool["kv_events"] = {}
    endpoints: list[dict[str, Any]] = [
        {"address": a, "batch_slots": slots} if policy.batch_slots else {"address": a}
        for a, slots in batch_slots.items()
    ]
    for endpoint in endpoints if policy.kv_events else ():
        ports = (kv_events or {}).get(endpoint["address"])
        if ports is not None:
            endpoint["kv_events"] = {"port": ports[0], "replay_port": ports[1]}
    for endpoint in endpoints:
        engine = (engines or {}).get(endpoint["address"], "vllm")
        if engine != "vllm":
            endpoint["engine"] = engine
    config = one_pool_config(
        endpoints=endpoints,
        listener_port=listener_port,
        pool=pool,
        # Without engine weights the engine stays off, the data path too: left unset it turns
        # itself on where the pool mixes engines, and the baseline would be weighted.
        signals={"scrape": {"enabled": True}, **(signals or {})}
        if policy.engine_weights
        else {"data_path": {"enabled": False}},
    )
    if streamed_route:
        listener = config["listeners"][0]
        listener["classify"] = {}
        listener["routes"].insert(0, {"name": "streamed", "pool": POOL, "match": {"stream": True}})
    return config
