"""Seeded request sequences: arrivals, lengths, prompts and headers, all decided up front.

Token counts follow the simulator's rule (``xds_lab.sim.tokens``): one token per word, plus
one per chat message for its role marker. Prompts are drawn from a fixed vocabulary with the
seeded generator, so the same ``LoadSpec`` always yields the same requests, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xds_lab.vocabulary import VOCABULARY

__all__ = ["LoadSpec", "RequestSpec", "build_requests", "fingerprint", "lognormal_length"]


class LoadSpec(BaseModel):
    """What to offer: workload shape, rate, count, headers and seed."""

    model_config = ConfigDict(extra="forbid")

    workload: Literal["chat", "shared-prefix", "multi-turn"] = Field(
        "chat", description="Length-distribution chat, shared system prompts, or sessions."
    )
    rate: float = Field(10.0, gt=0, description="Mean requests per second (Poisson arrivals).")
    requests: int = Field(100, ge=1, description="How many requests to send.")
    seed: int = Field(0, description="Same seed, same request sequence.")
    stream_fraction: float = Field(1.0, ge=0, le=1, description="Share sent with stream=true.")
    api: Literal["chat", "completions"] = Field("chat", description="Which endpoint to call.")
    model: str = Field("meta-llama/Llama-3.1-8B-Instruct", description="The model field sent.")
    input_mean: float = Field(730, gt=1, description="Mean prompt tokens (production chat).")
    input_sigma: float = Field(1.0, ge=0, description="Log-normal shape: the long tail.")
    input_cap: int = Field(8192, ge=1, description="Longest prompt.")
    output_mean: float = Field(300, gt=1, description="Mean output tokens.")
    output_sigma: float = Field(0.8, ge=0, description="Log-normal shape of output lengths.")
    output_cap: int = Field(1024, ge=1, description="Longest output.")
    groups: int = Field(8, ge=1, description="shared-prefix: distinct system prompts.")
    system_tokens: int = Field(1024, ge=1, description="shared-prefix: system prompt length.")
    question_tokens: int = Field(64, ge=1, description="shared-prefix: mean question length.")
    turns: int = Field(4, ge=1, description="multi-turn: turns per session.")
    think_time_s: float = Field(2.0, ge=0, description="multi-turn: mean gap between turns.")
    prefix_header: str = Field("x-prefix-hash", description="Header naming the shared prefix.")
    session_header: str = Field("x-session-id", description="Header naming the session.")


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request, fully decided: when (seconds after start), where, what, with which headers."""

    index: int
    at: float
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    prompt_tokens: int = 0
    max_tokens: int = 0

    @property
    def stream(self) -> bool:
        """Whether the response comes as server-sent events."""
        return bool(self.body.get("stream"))


def lognormal_length(rng: random.Random, *, mean: float, sigma: float, cap: int) -> int:
    """A length with the given mean (before capping) and log-normal tail, in ``1..cap``."""
    mu = math.log(mean) - sigma * sigma / 2
    return max(1, min(cap, round(rng.lognormvariate(mu, sigma))))


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=n))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(slots=True)
class _Draft:
    at: float
    messages: list[dict[str, str]]
    max_tokens: int
    headers: dict[str, str]


def _chat(spec: LoadSpec, rng: random.Random, times: list[float]) -> list[_Draft]:
    drafts = []
    for at in times:
        # The role marker is a token, so the words are one fewer than the drawn length.
        n = lognormal_length(rng, mean=spec.input_mean, sigma=spec.input_sigma, cap=spec.input_cap)
        out = lognormal_length(
            rng, mean=spec.output_mean, sigma=spec.output_sigma, cap=spec.output_cap
        )
        text = _words(rng, max(1, n - 1))
        drafts.append(_Draft(at, [{"role": "user", "content": text}], out, {}))
    return drafts


def _shared_prefix(spec: LoadSpec, rng: random.Random, times: list[float]) -> list[_Draft]:
    systems = [_words(rng, spec.system_tokens) for _ in range(spec.groups)]
    digests = [_digest(s) for s in systems]
    drafts = []
    for at in times:
        g = rng.randrange(spec.groups)
        q = max(1, round(rng.expovariate(1 / spec.question_tokens)))
        out = lognormal_length(
            rng, mean=spec.output_mean, sigma=spec.output_sigma, cap=spec.output_cap
        )
        messages = [
            {"role": "system", "content": systems[g]},
            {"role": "user", "content": _words(rng, q)},
        ]
        drafts.append(_Draft(at, messages, out, {spec.prefix_header: digests[g]}))
    return drafts


def _session_starts(rng: random.Random, times: list[float], *, rate: float) -> Iterator[float]:
    """``times``, then the same Poisson process on, for as long as the caller asks."""
    yield from times
    t = times[-1] if times else 0.0
    while True:
        t += rng.expovariate(rate)
        yield t


def _multi_turn(spec: LoadSpec, rng: random.Random, times: list[float]) -> list[_Draft]:
    """Sessions whose requests arrive at ``spec.rate`` from the first second on.

    Sessions that started only at t=0 would offer a fraction of the rate for the first
    (turns - 1) x think time seconds (no session past its first turn yet): a short step or
    point then offers less than it says (a 30-request ramp step at 3.7 req/s offered about 2).
    So sessions start ``lead`` seconds before the window, and only their requests from t=0 on
    are sent; a request from a session already under way carries its whole history, as it would
    have, with the earlier turns' cache left to chance.
    """
    lead = 3.0 * (spec.turns - 1) * spec.think_time_s  # past nearly every session's last turn
    horizon = 2.0 * len(times) / spec.rate + 10.0  # the window, with room for Poisson's spread
    drafts: list[_Draft] = []
    for s, raw in enumerate(_session_starts(rng, times, rate=spec.rate / spec.turns)):
        start = raw - lead  # session starts form a Poisson process at rate / turns
        if start > horizon:
            break
        session_id = f"{spec.seed}-{s}"
        history: list[dict[str, str]] = []
        at = start
        for _turn in range(spec.turns):
            q = lognormal_length(rng, mean=spec.input_mean / spec.turns, sigma=0.5, cap=2048)
            out = lognormal_length(
                rng, mean=spec.output_mean, sigma=spec.output_sigma, cap=spec.output_cap
            )
            history = [*history, {"role": "user", "content": _words(rng, q)}]
            headers = {spec.session_header: session_id, spec.prefix_header: _digest(session_id)}
            if at >= 0:
                drafts.append(_Draft(at, list(history), out, headers))
            # Open loop: the next turn's text (and its time) does not wait for this answer.
            history.append({"role": "assistant", "content": _words(rng, out)})
            at += rng.expovariate(1 / spec.think_time_s) if spec.think_time_s else 0.0
    drafts.sort(key=lambda d: d.at)
    return drafts[: len(times)]


def _poisson_times(rng: random.Random, *, rate: float, count: int) -> list[float]:
    times, t = [], 0.0
    for _ in range(count):
        t += rng.expovariate(rate)
        times.append(t)
    return times


def build_requests(spec: LoadSpec) -> list[RequestSpec]:
    """The request sequence ``spec`` stands for; a pure function of ``spec`` (seed included)."""
    rng = random.Random(spec.seed)
    turns = spec.turns if spec.workload == "multi-turn" else 1
    # Sessions arrive as a Poisson process at rate/turns so the total request rate is ``rate``.
    times = _poisson_times(rng, rate=spec.rate / turns, count=spec.requests)
    make = {"chat": _chat, "shared-prefix": _shared_prefix, "multi-turn": _multi_turn}
    drafts = make[spec.workload](spec, rng, times)
    out = []
    for index, draft in enumerate(drafts):
        stream = rng.random() < spec.stream_fraction
        body: dict[str, Any] = {"model": spec.model, "max_tokens": draft.max_tokens}
        if spec.api == "chat":
            body["messages"] = draft.messages
            prompt_tokens = sum(1 + len(m["content"].split()) for m in draft.messages)
        else:
            body["prompt"] = "\n".join(m["content"] for m in draft.messages)
            prompt_tokens = len(body["prompt"].split())
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        path = "/v1/chat/completions" if spec.api == "chat" else "/v1/completions"
        out.append(
            RequestSpec(index, draft.at, path, body, draft.headers, prompt_tokens, draft.max_tokens)
        )
    return out


def fingerprint(requests: list[RequestSpec]) -> str:
    """A content hash of a request sequence: equal sequences, equal fingerprints."""
    digest = hashlib.sha256()
    for r in requests:
        digest.update(json.dumps(asdict(r), sort_keys=True).encode())
    return digest.hexdigest()
