"""A pool's per-request endpoint picker: where it serves and how Envoy waits for it.

With ``picker`` set, Envoy asks the picker (an ``ext_proc`` gRPC service that ``xds-control
serve`` runs) for each request to the pool which server should take it, and the pool's cluster
honours the answer (``override_host``). Whatever goes wrong with the picker, Envoy falls back to
the pool's own load-balancing policy with the engine's weights: the picker can make routing
better, never a request fail. The one exception is a pool that asks to fail closed
(``fail_open: false``, or an InferencePool's ``failureMode: FailClose``).
"""

from __future__ import annotations

from pydantic import Field

from xds_control.config.address import IpPort
from xds_control.config.disaggregation import Disaggregation
from xds_control.config.discovery import HostNamePort
from xds_control.config.flow import FlowControl
from xds_control.config.lora import LoraAdapters
from xds_control.config.strict import StrictModel

__all__ = ["PoolPicker"]


class PoolPicker(StrictModel):
    """Opt a pool into per-request picking."""

    address: IpPort = Field(
        description="Where the picker serves gRPC: `xds-control serve` listens here, and Envoy "
        "dials it (a STATIC cluster of its own in CDS), so it must be reachable from Envoy. "
        "Read at start: a new address needs a restart (until then Envoy falls back)."
    )
    envoy_address: HostNamePort | None = Field(
        default=None,
        description="Where Envoy dials the picker when that is not `address`: behind a Service "
        "(central mode, several replicas) the Service's `NAME:PORT`, which Envoy resolves "
        "itself (a STRICT_DNS cluster), so each Envoy reaches whichever replica is up and every "
        "replica serves the same cluster. Unset: `address`.",
    )
    message_timeout_ms: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="How long Envoy waits for each of the picker's two answers (headers, "
        "body) before it lets the request through to the fallback policy "
        "(`failure_mode_allow`). A pick takes well under a millisecond; 50 ms bounds what a "
        "stalled picker adds to 100 ms, a fraction of a time to first token. A listener "
        "routing to several picker pools uses the shortest.",
    )
    fail_open: bool = Field(
        default=True,
        description="When the picker cannot answer (down, slow, a broken stream), the request "
        "goes on to the fallback policy (Envoy's `failure_mode_allow`). false: Envoy refuses it "
        "with a 500 instead. A pool whose endpoints come from an InferencePool takes its "
        "`endpointPickerRef.failureMode` in place of this (FailOpen: true; FailClose, the "
        "API's default: false).",
    )
    fallbacks: int = Field(
        default=2,
        ge=0,
        le=8,
        description="Further servers after the best one in the answer, best first (the "
        "Inference Extension's fallback list): `override_host` takes the first one its "
        "cluster still has, so a server that left between pick and send costs nothing.",
    )
    prefix_bytes: int = Field(
        default=256,
        ge=1,
        le=65_536,
        description="Without a system message, the prompt's first bytes that name its "
        "template (the classifier's `prefix_bytes`): requests of one template that tie on "
        "cost go to one server.",
    )
    max_body_bytes: int = Field(
        default=262_144,
        ge=1,
        le=1_048_576,
        description="Bodies longer than this are not parsed (bounded work per request): they "
        "get no pick and take the fallback policy. The default admits a prompt of about "
        "50,000 tokens of English (a 16,000-token prompt is some 64 KiB of text, before its "
        "JSON); a pick's work grows with the body, a few milliseconds at 100 KiB "
        "(docs/benchmarks.md, `pick_cost`). At most Envoy's 1 MiB buffer limit.",
    )
    tokenizer: str | None = Field(
        default=None,
        min_length=1,
        description="A directory holding the served model's `tokenizer.json` and its chat "
        "template (`chat_template.jinja` or `tokenizer_config.json`), as the model's repository "
        "ships them (relative: to the config file's directory); mount it, nothing is "
        "downloaded. `xds-control validate` loads it. With it the picker cuts each prompt into "
        "the engine's token ids: it counts prompt tokens exactly, and matches prompts against "
        "the blocks the servers' KV-cache events say they hold (`signals.kv_events`). Unset: "
        "tokens are estimated as bytes / 4 and routing history alone says where a prefix is. "
        "Loaded in the background; one that fails to load is logged, tried again every 30 s, "
        "and meanwhile picks go on without it.",
    )
    index_size: int = Field(
        default=50_000,
        ge=1,
        le=1_000_000,
        description="Prompt blocks (128 bytes of prompt each) the picker remembers per pool, "
        "least recently used forgotten first; about 200 bytes of memory each. The default "
        "holds 6.4 MB of distinct prompt text, about 1.6 million tokens.",
    )
    affinity: float = Field(
        default=4.0,
        ge=1,
        le=100,
        description="How much more a server that already holds the request's prefix is worth "
        "than its engine weight alone: a cache hit saves the prefill, worth a few times the "
        "queue a busier server adds. 1: ignore the prefix index.",
    )
    move_cost: float = Field(
        default=16.0,
        ge=1,
        le=100,
        description="How many times the prefill a request would redo off the server that "
        "holds its prefix counts against moving it there: a holder keeps the request until "
        "its queue outweighs this many times the prefill it saves. Above 1 because a move "
        "also delays what queues behind it, evicts others' prefixes for a second copy and "
        "splits the prefix's later requests (a session's next turns) over two servers; "
        "multi-turn sessions hit the cache 0.505 at 16, 0.498 at 8, 0.44 at 2 (docs/picker.md).",
    )
    per_response_load: bool = Field(
        default=False,
        description="Ask the pool's servers for their load with every response: Envoy adds "
        "`endpoint-load-metrics-format: TEXT` to each request, vLLM and Triton's TensorRT-LLM "
        "backend answer with an `endpoint-load-metrics` header (the queue and KV-cache use "
        "when they answered), which the picker reads and removes before the client sees it. "
        "The picker then reads each server's queue from its last response when that is "
        "fresher than the engine's reading, and the engine takes the reports as one more "
        "signal source (the freshest reading wins). A server that sends none (SGLang) is "
        "weighed and picked as without. Off by default: it changes picks (docs/picker.md).",
    )
    flow: FlowControl | None = Field(
        default=None,
        description="Hold requests while every server is saturated instead of sending them "
        "on (docs/flow-control.md). Unset: every request is picked at once.",
    )

    lora: LoraAdapters | None = Field(
        default=None,
        description="The pool's LoRA adapters: a request whose `model` names one goes to "
        "the servers running it while they have room, and avoids a server whose adapter "
        "slots are full (docs/picker.md, *adapter*). Unset: `model` is not read.",
    )

    disaggregation: Disaggregation | None = Field(
        default=None,
        description="Prefill a request's prompt on another server of the pool than the one "
        "that decodes it, for prompts worth it (endpoints' `role`, docs/disaggregation.md). "
        "Unset: every server prefills what it decodes.",
    )

    @property
    def dial_address(self) -> str:
        """The address Envoy's cluster to the picker dials: ``envoy_address``, else
        ``address``."""
        return self.envoy_address or self.address
