"""The config model: pools of inference servers, the listeners and routes in front of them.

One pydantic model validates the YAML file, ``XDS_CONTROL_*`` environment overrides and, later,
the Helm chart's ``values.config``. Every field's description says why its default is what it is.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator

from xds_control.config.address import IpPort
from xds_control.config.autoscale import AutoscalePolicy
from xds_control.config.classes import Classify, TokenRange
from xds_control.config.devices import Device
from xds_control.config.discovery import DnsDiscovery, InferencePoolDiscovery, KubernetesDiscovery
from xds_control.config.kv_events import KvEventPorts, KvEventsConfig
from xds_control.config.limits import Limits, PriorityClass
from xds_control.config.picker import PoolPicker
from xds_control.config.regex import re2_error
from xds_control.config.roles import Role
from xds_control.config.strict import StrictModel
from xds_control.config.weights import WeightPolicy

__all__ = [
    "STREAMED_TRY_IDLE_S",
    "CircuitBreakers",
    "EndpointConfig",
    "Engine",
    "HashKey",
    "HeaderMatch",
    "LbPolicy",
    "Listener",
    "LoadBalancing",
    "OutlierDetection",
    "Pool",
    "PoolShare",
    "RetryPolicy",
    "Route",
    "RouteMatch",
]

NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"
"""What a name may be: it becomes an Envoy resource name (or a node group's name)."""

Name = Annotated[
    str,
    Field(
        pattern=NAME_PATTERN,
        description="Lower-case letters, digits, '.', '_' and '-' (it becomes an Envoy name).",
    ),
]


class Engine(StrEnum):
    """The inference engine behind a server: it selects the metric names the server is read in
    (its dialect) and the engine base weight. A pool's ``engine`` is its servers' default."""

    VLLM = "vllm"
    TRITON = "triton"
    ONNXRUNTIME = "onnxruntime"
    SGLANG = "sglang"


class LbPolicy(StrEnum):
    """Envoy's load-balancing policy for a pool; each honours endpoint weights."""

    MAGLEV = "maglev"
    LEAST_REQUEST = "least_request"
    ROUND_ROBIN = "round_robin"


class EndpointConfig(StrictModel):
    """One inference server."""

    address: IpPort = Field(description="IP:PORT of the server; EDS endpoints must be IPs.")
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Static weight (1..100; Envoy rejects 0), served when no signal source is "
        "configured; with one, the weight engine decides.",
    )
    batch_slots: int | None = Field(
        default=None,
        ge=1,
        description="The server's batch slots (vLLM and SGLang --max-num-seqs) for the weight "
        "engine's capacity estimate when the server does not export them (vLLM does not); "
        "unset: the pool's weights.max_num_seqs.",
    )
    device: Device | None = Field(
        default=None,
        description="The GPU / MIG slice the server runs on; required in a single_device pool.",
    )
    engine: Engine | None = Field(
        default=None,
        description="The server's engine, when it is not the pool's `engine` (a pool may mix "
        "engines): its metric names and engine base weight. Unset: the pool's.",
    )
    kv_events: KvEventPorts | None = Field(
        default=None,
        description="The server's KV-event ports, when not its pool's `kv_events` ports "
        "(docs/kv-events.md). Read only in a pool with `kv_events`.",
    )
    role: Role = Field(
        default=Role.BOTH,
        description="Its part in a disaggregated pool (the pool's picker `disaggregation`): "
        "`prefill` (prefills for other servers), `decode` or `both` (docs/disaggregation.md).",
    )


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


class LoadBalancing(StrictModel):
    """How Envoy spreads a pool's requests over its endpoints."""

    policy: LbPolicy = Field(
        default=LbPolicy.MAGLEV,
        description="maglev keeps a prompt prefix or session on one server (warm KV cache); "
        "least_request suits traffic with no reusable prefix; round_robin is the baseline "
        "that benchmarks compare against.",
    )
    maglev_table_size: int = Field(
        default=65537,
        ge=3,
        le=5000011,
        description="Prime size of the MAGLEV lookup table; Envoy's default 65537 keeps the "
        "share error under 1% for up to a few hundred endpoints.",
    )
    hash_balance_factor: int | None = Field(
        default=None,
        ge=100,
        description="Bounded load in percent of the average (e.g. 150): no server takes more "
        "than this while others have room. Unset means pure consistent hashing.",
    )
    choice_count: int = Field(
        default=2,
        ge=2,
        description="least_request: hosts sampled per pick (power of two choices).",
    )
    active_request_bias: float = Field(
        default=0.5,
        ge=0,
        le=10,
        description="least_request with unequal weights: Envoy picks by weight / (active "
        "requests + 1) ** bias instead of sampling two hosts. Envoy's own default, 1.0, sends a "
        "request to an idle slow server before a fast one running a batch, which cancels "
        "capacity weights (an LLM server's batch is not its queue); 0.5 still counts load.",
    )

    @field_validator("maglev_table_size")
    @classmethod
    def _prime(cls, value: int) -> int:
        if not _is_prime(value):
            raise ValueError(f"{value} is not prime (Envoy requires a prime MAGLEV table size)")
        return value


class CircuitBreakers(StrictModel):
    """Envoy's per-pool limits; defaults are Envoy's own, which suit most fleets."""

    max_connections: int = Field(default=1024, ge=1, description="Upstream connections.")
    max_pending_requests: int = Field(default=1024, ge=1, description="Requests queued in Envoy.")
    max_requests: int = Field(default=1024, ge=1, description="Requests in flight.")
    max_retries: int = Field(
        default=3, ge=0, description="Retries in flight, when `retry_budget_percent` is unset."
    )
    retry_budget_percent: float | None = Field(
        default=50.0,
        gt=0,
        le=100,
        description="Retries in flight at most this percent of the requests in flight (Envoy's "
        "retry budget; it replaces `max_retries`): a failing pool cannot add more than this "
        "to its load with retries, and a busy one still retries in proportion. 50: a pool "
        "that loses one server of two moves all it had not begun (Envoy's usual 20 refused "
        "such retries in the fault suite). Unset: `max_retries`.",
    )
    min_retry_concurrency: int = Field(
        default=10,
        ge=1,
        description="Retries always allowed in flight under the budget, so a quiet pool can "
        "retry at all: 10 covers what a crashed server held at once in the fault suite (3 "
        "refused one of its retries).",
    )


class OutlierDetection(StrictModel):
    """Passive health checking: Envoy ejects a server that keeps failing."""

    consecutive_5xx: int = Field(default=5, ge=1, description="5xx in a row before ejection.")
    interval_s: float = Field(default=10.0, gt=0, description="Seconds between ejection sweeps.")
    base_ejection_time_s: float = Field(
        default=30.0, gt=0, description="Seconds a first ejection lasts (it grows on repeats)."
    )
    max_ejection_percent: int = Field(
        default=50, ge=0, le=100, description="Never eject more than this share of a pool."
    )


class Pool(StrictModel):
    """A pool of inference servers: one Envoy cluster."""

    name: Name
    engine: Engine = Field(
        default=Engine.VLLM,
        description="Engine of the pool's servers, unless an endpoint entry's `engine` or a "
        "pod's label `xds-control.io/engine` names another: it selects the metric names each "
        "server is read in and its engine base weight.",
    )
    endpoints: tuple[EndpointConfig, ...] = Field(
        default=(), description="Servers listed inline. Use this or endpoints_file."
    )
    endpoints_file: Path | None = Field(
        default=None,
        description="YAML file with an `endpoints:` list, watched for changes; relative paths "
        "are read from the config file's folder.",
    )
    kubernetes: KubernetesDiscovery | None = Field(
        default=None, description="Endpoints of a Kubernetes Service, from its EndpointSlices."
    )
    dns: DnsDiscovery | None = Field(
        default=None, description="Host names resolved to endpoints, re-resolved periodically."
    )
    inference_pool: InferencePoolDiscovery | None = Field(
        default=None,
        description="Endpoints of a Gateway API Inference Extension InferencePool: the ready "
        "pods its selector matches, on its target ports.",
    )
    lb: LoadBalancing = Field(
        default_factory=LoadBalancing, description="Envoy load-balancing policy and its knobs."
    )
    connect_timeout_s: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="TCP connect timeout; servers are near.",
    )
    protocol: Literal["http1", "http2"] = Field(
        default="http1",
        description="Upstream protocol. vLLM's and SGLang's OpenAI servers speak HTTP/1.1.",
    )
    circuit_breakers: CircuitBreakers = Field(
        default_factory=CircuitBreakers, description="Envoy's per-pool request limits."
    )
    outlier_detection: OutlierDetection | None = Field(
        default=None, description="Unset: no passive ejection (the weight engine reacts instead)."
    )
    weights: WeightPolicy = Field(
        default_factory=WeightPolicy,
        description="How the weight engine turns this pool's signals into endpoint weights.",
    )
    autoscale: AutoscalePolicy = Field(
        default_factory=AutoscalePolicy,
        description="The replica recommendation exported for an HPA; off by default.",
    )
    single_device: bool = Field(
        default=False,
        description="All endpoints must be MIG slices of one GPU (same device.gpu_uuid); "
        "others are refused.",
    )
    picker: PoolPicker | None = Field(
        default=None,
        description="Per-request endpoint picking (docs/picker.md); unset: the pool's `lb` "
        "policy with the engine's weights picks alone.",
    )
    kv_events: KvEventsConfig | None = Field(
        default=None,
        description="Subscribe to the servers' KV-cache events (vLLM's `--kv-events-config` "
        "ZMQ publisher; docs/kv-events.md). Unset: none.",
    )

    @model_validator(mode="after")
    def _one_endpoint_source(self) -> Self:
        if self.endpoints and self.endpoints_file is not None:
            raise ValueError("give either endpoints or endpoints_file, not both")
        sources = ("endpoints", "endpoints_file", "kubernetes", "dns", "inference_pool")
        given = [k for k in sources if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give one endpoint source, not {' and '.join(given)}")
        return self


class HeaderMatch(StrictModel):
    """Match a request header; exactly one of exact, prefix, regex, present."""

    name: str = Field(min_length=1, description="Header name (case-insensitive).")
    exact: str | None = None
    prefix: str | None = None
    regex: str | None = Field(
        default=None,
        description="RE2 syntax, checked here as Envoy will (look-arounds and back-references "
        "are not RE2). Envoy also caps a regex's compiled size (100 by default, a runtime "
        "setting); a larger one is rejected by Envoy and the last good routes stay.",
    )
    present: bool | None = None
    invert: bool = Field(default=False, description="Match when the condition does not hold.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [k for k in ("exact", "prefix", "regex", "present") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of exact, prefix, regex, present")
        if self.regex is not None:
            problem = re2_error(self.regex)
            if problem is not None:
                raise ValueError(f"regex {self.regex!r} is not RE2 (Envoy's syntax): {problem}")
        return self


class RouteMatch(StrictModel):
    """What a request must look like to take a route."""

    prefix: str = Field(default="/", pattern=r"^/", description="Path prefix.")
    headers: tuple[HeaderMatch, ...] = Field(default=(), description="All must match.")
    model: str | None = Field(
        default=None,
        description="Model name, matched exactly on the header named by `model_header` "
        "(set by clients, or by the listener's `classify` filter from the body).",
    )
    prompt_tokens: TokenRange | None = Field(
        default=None,
        description="Estimated prompt tokens (from the body, by the listener's `classify`).",
    )
    max_tokens: TokenRange | None = Field(
        default=None, description="The body's max_tokens (by the listener's `classify`)."
    )
    stream: bool | None = Field(
        default=None, description="Whether the body asks to stream (by the listener's `classify`)."
    )
    keywords: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        default=(),
        description="Any of these words in the prompt (ASCII case-insensitive substring; by the "
        "listener's `classify`).",
    )

    def reads_body(self) -> bool:
        """Whether the match needs the listener's ``classify`` filter."""
        return (
            self.prompt_tokens is not None
            or self.max_tokens is not None
            or self.stream is not None
            or bool(self.keywords)
        )


class HashKey(StrictModel):
    """One source of the consistent-hash key; a route lists them as a fallback chain."""

    header: str | None = Field(default=None, description="Hash on this header's value.")
    source_ip: bool | None = Field(default=None, description="Hash on the client's address.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.header is None) == (self.source_ip is None):
            raise ValueError("give exactly one of header, source_ip")
        return self


STREAMED_TRY_IDLE_S = 60.0
"""Default per-try idle timeout of a route that carries only streamed requests: above the first
token of the longest prompt on the slowest simulated server (32,768 tokens, the profiles' context
limit, prefilled in one pass by ONNX Runtime on an L4: 0.18 s + 1.2 ms a token, 39.5 s), with
about 20 s of queueing to spare. The same pass stalls the other streams on that server as long,
so the gap between two tokens fits too."""


class RetryPolicy(StrictModel):
    """Envoy retries, on by default. Envoy never retries once the response has begun reaching
    the client (a streamed response sends its headers with the first token; a non-streamed one
    when it is done), so what a retry repeats is at most a generation whose answer was lost."""

    retry_on: str = Field(
        default="connect-failure,refused-stream,reset",
        description="Envoy retry_on conditions (comma-separated). `reset`, not "
        "`reset-before-request`: Envoy counts a try's timeout as a reset after the request was "
        "sent, so only `reset` moves a request off a hung server; it also retries a "
        "non-streamed request whose server died mid-generation, which runs that generation "
        "again elsewhere (the client gets an answer, not a 503; the pool's retry budget bounds "
        "the extra load).",
    )
    num_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries per request: a third server when two fail at once (a rollout, "
        "a crash that resets what another just refused). With one server killed under load "
        "two retries lost none in the fault suite.",
    )
    per_try_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Longest wait for a try's response headers (Envoy stops the clock once "
        "they reach the client). A streamed response's headers come with its first token, a "
        "non-streamed one's when the whole answer is done: so this cuts, and retries, every "
        "non-streamed generation longer than it. Unset: none (the route's `timeout_s`); the "
        "per-try idle timeout bounds the first token of streamed requests instead.",
    )
    per_try_idle_timeout_s: float | None = Field(
        default=None,
        ge=0,
        description="Longest silence from the server on one try, first byte included, "
        "after which the try is reset and retried on another server if nothing has reached "
        "the client yet (once the response has begun, the reset ends it). A non-streamed "
        "response is silent until done, so a limit cuts long generations: unset, it is "
        f"{STREAMED_TRY_IDLE_S:.0f} on a route that matches only streamed requests "
        "(`match.stream: true`) and none on any other; 0: none.",
    )
    other_host: bool = Field(
        default=True,
        description="Retry on a server not yet tried (Envoy's previous_hosts predicate): the "
        "one that failed is likely to fail again.",
    )

    def try_idle_timeout_s(self, *, streamed: bool) -> float | None:
        """The per-try idle timeout Envoy gets on a route that carries only streamed requests
        (``streamed``) or any other; ``None``: none."""
        if self.per_try_idle_timeout_s is None:
            return STREAMED_TRY_IDLE_S if streamed else None
        return self.per_try_idle_timeout_s or None


class PoolShare(StrictModel):
    """One pool of a route over several, with its static share."""

    name: str = Field(description="Name of the pool.")
    weight: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="Static share, served while the weight engine is off; with it on, the "
        "engine's measure of the pool's capacity decides, except on a route that mixes vLLM or "
        "SGLang pools with Triton or ONNX Runtime ones (their step times are different "
        "measures), which keeps these shares.",
    )


DEFAULT_HASH_POLICY = (HashKey(header="x-session-id"), HashKey(header="x-prefix-hash"))


class Route(StrictModel):
    """Send matching requests to a pool."""

    name: Name
    match: RouteMatch = Field(
        default_factory=RouteMatch, description="Default: every request (prefix `/`)."
    )
    pool: str | None = Field(
        default=None, description="Name of the pool that serves the route (or give `pools`)."
    )
    pools: tuple[PoolShare, ...] = Field(
        default=(),
        description="Several pools sharing the route (Envoy weighted clusters), in proportion "
        "to their capacity as the weight engine measures it, or to their static `weight`.",
    )
    timeout_s: float = Field(
        default=300.0,
        ge=0,
        description="Whole-request timeout; long, since generation takes minutes. 0 disables.",
    )
    idle_timeout_s: float | None = Field(
        default=None,
        ge=0,
        description="Longest silence on a request's stream (no byte either way). A streaming "
        "response sends a chunk per token, so a short limit (e.g. 30) ends a stuck stream "
        "early; a non-streaming one is silent until done, so keep it above the longest "
        "generation. Unset: the listener's `stream_idle_timeout_s`. 0 disables.",
    )
    retry: RetryPolicy | None = Field(
        default_factory=RetryPolicy,
        description="Retries on another server of what failed before any answer reached the "
        "client: connect failures, refused streams, resets and, on a route of streamed "
        "requests, a server silent past the per-try idle timeout. `null`: no retries.",
    )
    priority: PriorityClass | None = Field(
        default=None,
        description="Priority class of this route's requests that name none: their class "
        "under the listener's `limits` (header `limits.header`) and, on a pool with a picker's "
        "`flow`, their band (header `flow.priority_header`). Unset: `limits.default`, else "
        "(no `limits`) `medium`.",
    )
    hash_policy: tuple[HashKey, ...] = Field(
        default=DEFAULT_HASH_POLICY,
        description="Hash key sources tried in order; the first present one wins. With none "
        "present Envoy picks by weight at random. Default: session id, then prompt-prefix hash.",
    )

    @model_validator(mode="after")
    def _one_pool_source(self) -> Self:
        if (self.pool is None) == (not self.pools):
            raise ValueError("give exactly one of pool, pools")
        names = [share.name for share in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pools lists a pool twice: {names}")
        return self

    def pool_names(self) -> tuple[str, ...]:
        """Every pool the route sends to."""
        return (self.pool,) if self.pool is not None else tuple(s.name for s in self.pools)


class Listener(StrictModel):
    """An Envoy listener with its route table."""

    name: Name
    address: IpPort = Field(description="IP:PORT Envoy listens on.")
    routes: tuple[Route, ...] = Field(min_length=1, description="Tried in order; first match wins.")
    classify: Classify | None = Field(
        default=None,
        description="Read each request's JSON body inside Envoy and set headers that routes "
        "match (model, prompt tokens, max_tokens, stream, keywords), MAGLEV hashes (prefix "
        "hash) and a token budget charges (cost). Unset: no body is read; `match.model` then "
        "needs the client's header.",
    )
    limits: Limits | None = Field(
        default=None,
        description="Priority classes (critical, high, medium) and their admission budgets, "
        "enforced by Envoy's local rate limit per route and adapted to the measured P99 "
        "(docs/limits.md). Unset: no classes, no limits.",
    )
    stream_idle_timeout_s: float = Field(
        default=300.0,
        ge=0,
        description="Longest silence on a request's stream for the whole listener (Envoy's own "
        "default, 5 minutes: above most non-streaming generations); a route's `idle_timeout_s` "
        "overrides it. 0 disables.",
    )

    @model_validator(mode="after")
    def _body_matches_need_classify(self) -> Self:
        if self.classify is not None:
            return self
        for i, route in enumerate(self.routes):
            if route.match.reads_body():
                raise ValueError(
                    f"routes[{i}].match ({route.name}) matches on the body (prompt_tokens, "
                    "max_tokens, stream or keywords): set the listener's `classify`"
                )
        return self
