"""The golden record's inputs as plain data: configs, servers that count and write their
/metrics in their engine's own names, the requests Envoy's access log saw end, a vLLM server's
KV-cache events and a seeded sequence of requests. Nothing here calls the product (that is
``harness.py``'s), so an API change never touches it; every number is fixed or drawn from
``random.Random`` with a fixed seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "BLOCK",
    "CYCLES",
    "CYCLE_S",
    "EVICT_OVER",
    "FAILING",
    "FAILING_AT",
    "FLEET",
    "GROUPS",
    "LOSES_WEIGHT",
    "NO_METRICS",
    "OUTAGE_AT",
    "PICKER_CONFIG",
    "PICKER_DECISIONS",
    "PUBLISHING",
    "REMOVED",
    "REMOVED_AT",
    "REQUESTS",
    "REWEIGH_AT",
    "SILENT_AT",
    "SLOWED",
    "SLOWED_AT",
    "SNAPSHOT_CONFIG",
    "STALE",
    "STALE_FROM",
    "T0",
    "UNHEALTHY",
    "Finished",
    "KvCache",
    "Request",
    "Server",
    "batch_servers",
    "fleet_servers",
    "requests",
    "token_ids",
]

T0 = 1_700_000_000.0
"""The first cycle's time (Unix seconds); every clock of the record counts from it."""
CYCLE_S = 3.0
CYCLES = 50


class Finished(NamedTuple):
    """One request that ended on a server, as Envoy's access log sees it (streamed, 200)."""

    address: str
    finished_at: float
    ttfb_s: float
    duration_s: float
    response_bytes: int
    request_bytes: int
    stream_id: str


# ---------------------------------------------------------------------------------- weights

FLEET = """\
signals:
  prometheus_url: http://127.0.0.1:1
  scrape: {enabled: true}
  data_path: {enabled: true}
pools:
  - name: chat
    engine: vllm
    lb: {policy: maglev}
    endpoints:
      - {address: 10.0.0.1:8000, batch_slots: 64}
      - {address: 10.0.0.2:8000, batch_slots: 64}
      - {address: 10.0.0.3:8000, batch_slots: 64, engine: sglang}
      - {address: 10.0.0.4:8000, batch_slots: 64}
      - {address: 10.0.0.5:8000, batch_slots: 64}
  - name: triton
    engine: triton
    lb: {policy: least_request, choice_count: 2}
    endpoints:
      - {address: 10.0.1.1:8000, batch_slots: 32}
      - {address: 10.0.1.2:8000, batch_slots: 32, engine: onnxruntime}
      - {address: 10.0.1.3:8000, batch_slots: 32}
  - name: batch
    engine: vllm
    endpoints:
      - {address: 10.0.2.1:8000, batch_slots: 64}
      - {address: 10.0.2.2:8000, batch_slots: 64}
listeners:
  - name: gateway
    address: 0.0.0.0:10000
    routes:
      - {name: spill, match: {prefix: /spill}, pools: [{name: chat}, {name: batch}]}
      - {name: mixed, match: {prefix: /mixed}, pools: [{name: chat}, {name: triton}]}
      - {name: chat, pool: chat}
"""
"""Five chat servers (vLLM, one slowed at cycle 20, SGLang, one with no metrics, timed by the
data path alone until no request ends on it from cycle 28 and its readings go stale, one
removed at cycle 35), a Triton pool (Triton, ONNX Runtime, one whose scrapes fail from cycle
25) and a vLLM pool that Prometheus reads too, until it goes down at cycle 20."""

SLOWED, SLOWED_AT = "10.0.0.2:8000", 20
"""Its decode step grows fourfold from this cycle on."""
NO_METRICS, SILENT_AT = "10.0.0.4:8000", 28
"""Timed by the data path alone; from this cycle on no request ends on it."""
REMOVED, REMOVED_AT = "10.0.0.5:8000", 35
"""Discovery stops listing it from this cycle on."""
FAILING, FAILING_AT = "10.0.1.3:8000", 25
"""Its /metrics answers 503 from this cycle on."""
OUTAGE_AT = 20
"""Prometheus fails every query from this cycle on."""


@dataclass
class Server:
    """A simulated server's counters: advanced each cycle, written in its engine's dialect."""

    address: str
    dialect: str  # vllm | sglang | triton | onnxruntime | none
    step_s: float
    running: float
    rng: random.Random
    counters: dict[str, float] = field(default_factory=dict)

    def advance(self, seconds: float) -> None:
        """Run ``seconds`` more at the server's step time."""
        steps = seconds / self.step_s
        jitter = 1.0 + self.rng.uniform(-0.05, 0.05)
        add = {
            "step_sum": steps * self.step_s * jitter,
            "step_count": steps,
            "tokens": steps * self.running,
            "prompt_tokens": steps * self.running * 4.0,
            "prefix_hits": steps * self.running * 1.5,
            "prefix_queries": steps * self.running * 4.0,
            "requests": seconds * self.running / 8.0,
            "ttft_fast": seconds * self.running / 8.0 * 0.9,
            "exec_us": seconds * self.running / 8.0 * self.step_s * 40 * 1e6 * jitter,
        }
        for key, value in add.items():
            self.counters[key] = self.counters.get(key, 0.0) + value

    def exposition(self) -> str:
        """Its /metrics now, in its engine's names."""
        c, running = self.counters, self.running
        waiting = round(self.rng.uniform(0, 3))
        kv = round(0.3 + self.rng.uniform(0, 0.3), 4)
        if self.dialect in ("vllm", "sglang"):
            p = "vllm:" if self.dialect == "vllm" else "sglang:"
            lines = [
                f"# TYPE {p}generation_tokens counter",
                f'{p}generation_tokens_total{{model_name="m"}} {c["tokens"]!r}',
                f"# TYPE {p}prompt_tokens counter",
                f'{p}prompt_tokens_total{{model_name="m"}} {c["prompt_tokens"]!r}',
                f"# TYPE {p}inter_token_latency_seconds histogram",
                f'{p}inter_token_latency_seconds_bucket{{le="+Inf",model_name="m"}} '
                f"{c['step_count']!r}",
                f'{p}inter_token_latency_seconds_count{{model_name="m"}} {c["step_count"]!r}',
                f'{p}inter_token_latency_seconds_sum{{model_name="m"}} {c["step_sum"]!r}',
                f"# TYPE {p}time_to_first_token_seconds histogram",
                f'{p}time_to_first_token_seconds_bucket{{le="1.0",model_name="m"}} '
                f"{c['ttft_fast']!r}",
                f'{p}time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} '
                f"{c['requests']!r}",
                f'{p}time_to_first_token_seconds_count{{model_name="m"}} {c["requests"]!r}',
                f'{p}time_to_first_token_seconds_sum{{model_name="m"}} {c["requests"]!r}',
            ]
            if self.dialect == "vllm":
                lines += [
                    f'vllm:num_requests_running{{model_name="m"}} {running!r}',
                    f'vllm:num_requests_waiting{{model_name="m"}} {float(waiting)!r}',
                    f'vllm:kv_cache_usage_perc{{model_name="m"}} {kv!r}',
                    "# TYPE vllm:prefix_cache_hits counter",
                    f'vllm:prefix_cache_hits_total{{model_name="m"}} {c["prefix_hits"]!r}',
                    "# TYPE vllm:prefix_cache_queries counter",
                    f'vllm:prefix_cache_queries_total{{model_name="m"}} {c["prefix_queries"]!r}',
                ]
            else:
                lines += [
                    f'sglang:num_running_reqs{{model_name="m"}} {running!r}',
                    f'sglang:num_queue_reqs{{model_name="m"}} {float(waiting)!r}',
                    f'sglang:token_usage{{model_name="m"}} {kv!r}',
                    f'sglang:cache_hit_rate{{model_name="m"}} {0.375!r}',
                ]
        elif self.dialect in ("triton", "onnxruntime"):
            lines = [
                "# TYPE nv_inference_compute_infer_duration_us counter",
                f'nv_inference_compute_infer_duration_us{{model="m",version="1"}} {c["exec_us"]!r}',
                "# TYPE nv_inference_exec_count counter",
                f'nv_inference_exec_count{{model="m",version="1"}} {c["requests"]!r}',
                "# TYPE nv_inference_request_success counter",
                f'nv_inference_request_success{{model="m",version="1"}} {c["requests"]!r}',
                "# TYPE nv_inference_request_failure counter",
                'nv_inference_request_failure{model="m",version="1"} 0.0',
                "# TYPE nv_inference_count counter",
                f'nv_inference_count{{model="m",version="1"}} {c["tokens"]!r}',
                f'nv_inference_pending_request_count{{model="m",version="1"}} {float(waiting)!r}',
                f'nv_gpu_memory_used_bytes{{gpu_uuid="g"}} {kv * 8e10!r}',
                f'nv_gpu_memory_total_bytes{{gpu_uuid="g"}} {8e10!r}',
            ]
            if self.dialect == "triton":
                lines += [
                    f'nv_trt_llm_request_metrics{{request_type="scheduled"}} {running!r}',
                    f'nv_trt_llm_request_metrics{{request_type="waiting"}} {float(waiting)!r}',
                    f'nv_trt_llm_request_metrics{{request_type="max"}} {32.0!r}',
                    f'nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction"}} {kv!r}',
                ]
        else:
            lines = ["# a server that exports none of its engine's metrics"]
        lines.append(f"process_start_time_seconds {T0 - 3600.0!r}")
        return "\n".join(lines) + "\n"

    def finished(self, *, now: float) -> list[Finished]:
        """The requests Envoy's access log saw end on this server in the last cycle."""
        out = []
        for k in range(3):
            tokens = 100 + self.rng.randrange(50)
            stream_s = tokens * self.step_s
            ttfb = 0.2 + self.rng.uniform(0.0, 0.2)
            out.append(
                Finished(
                    address=self.address,
                    finished_at=now - k * 0.5,
                    ttfb_s=ttfb,
                    duration_s=ttfb + stream_s,
                    response_bytes=tokens * 12,
                    request_bytes=tokens * 20,
                    stream_id=f"{self.address}/{now}/{k}",
                )
            )
        return out


def fleet_servers(rng: random.Random) -> dict[str, Server]:
    """The chat and Triton pools' servers, by address."""
    spec = [
        ("10.0.0.1:8000", "vllm", 0.020, 24.0),
        (SLOWED, "vllm", 0.022, 24.0),
        ("10.0.0.3:8000", "sglang", 0.025, 20.0),
        (NO_METRICS, "none", 0.030, 16.0),
        (REMOVED, "vllm", 0.028, 16.0),
        ("10.0.1.1:8000", "triton", 0.040, 12.0),
        ("10.0.1.2:8000", "onnxruntime", 0.060, 8.0),
        (FAILING, "triton", 0.045, 12.0),
    ]
    return {a: Server(a, d, step, running, rng) for a, d, step, running in spec}


def batch_servers(rng: random.Random) -> dict[str, Server]:
    """The batch pool's servers (Prometheus reads them too), by address."""
    spec = [("10.0.2.1:8000", 0.020), ("10.0.2.2:8000", 0.035)]
    return {a: Server(a, "vllm", step, 20.0, rng) for a, step in spec}


# -------------------------------------------------------------------------------- snapshots

SNAPSHOT_CONFIG = """\
signals: {data_path: {enabled: true}}
pools:
  - name: chat
    engine: vllm
    lb: {policy: maglev, hash_balance_factor: 150}
    picker: {address: 127.0.0.1:9002, fallbacks: 2}
    endpoints:
      - {address: 10.0.0.1:8000}
      - {address: 10.0.0.2:8000}
      - {address: 10.0.0.3:8000, engine: sglang}
      - {address: 10.0.0.4:8000}
      - {address: 10.0.0.5:8000}
  - name: triton
    engine: triton
    lb: {policy: least_request, choice_count: 2}
    endpoints:
      - {address: 10.0.1.1:8000}
      - {address: 10.0.1.2:8000, engine: onnxruntime}
      - {address: 10.0.1.3:8000}
  - name: batch
    engine: vllm
    lb: {policy: least_request}
    outlier_detection: {consecutive_5xx: 5, base_ejection_time_s: 30}
    endpoints:
      - {address: 10.0.2.1:8000}
      - {address: 10.0.2.2:8000}
listeners:
  - name: gateway
    address: 0.0.0.0:10000
    classify: {max_body_bytes: 65536}
    limits:
      unit: tokens
      classes: {critical: {rate_per_s: 100}, high: {rate_per_s: 200}, medium: {rate_per_s: 300}}
      adapt: {ttft_p99_target_s: 2.0, tpot_p99_target_s: 0.1}
    routes:
      - name: short
        match: {stream: true, prompt_tokens: {max: 1000}}
        pool: chat
        idle_timeout_s: 30
        retry: {per_try_idle_timeout_s: 10}
      - name: spill
        match: {prefix: /spill}
        pools: [{name: chat, weight: 3}, {name: batch}]
      - name: mixed
        match: {prefix: /mixed}
        pools: [{name: chat}, {name: triton}]
      - name: batch
        match: {prefix: /v1/, headers: [{name: x-priority, exact: batch}]}
        pool: batch
        priority: high
      - {name: default, pool: chat}
  - name: team
    address: 0.0.0.0:10001
    routes: [{name: triton, pool: triton}]
"""
"""Every kind of resource the builders make: MAGLEV and LEAST_REQUEST pools, a picker pool,
request classes, routes over several pools, a limited listener and an unlimited one."""

GROUPS = """\
node_groups:
  - {name: edge, match: {cluster: gateway}, listeners: [gateway]}
  - {name: team, match: {cluster: team}, listeners: [team], pools: [batch]}
"""


# ---------------------------------------------------------------------------------- picker

PICKER_CONFIG = """\
pools:
  - name: chat
    engine: vllm
    picker: {address: 127.0.0.1:9002, fallbacks: 2, index_size: 4096}
    endpoints:
      - {address: 10.0.0.1:8000}
      - {address: 10.0.0.2:8000}
      - {address: 10.0.0.3:8000}
      - {address: 10.0.0.4:8000, engine: onnxruntime}
      - {address: 10.0.0.5:8000}
      - {address: 10.0.0.6:8000}
  - name: busy
    engine: vllm
    picker:
      address: 127.0.0.1:9002
      flow: {max_wait_s: 5, queue_depth: 4, kv_usage: 0.9}
    endpoints:
      - {address: 10.0.3.1:8000}
      - {address: 10.0.3.2:8000}
listeners:
  - name: gateway
    address: 0.0.0.0:10000
    routes: [{name: busy, match: {prefix: /busy}, pool: busy}, {name: chat, pool: chat}]
"""
PUBLISHING = ("10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.5:8000")
"""The chat servers that send KV events (vLLM); 10.0.0.4 is ONNX Runtime (no prefix cache),
10.0.0.6 sends none (routing history decides for it)."""
STALE = "10.0.0.5:8000"
STALE_FROM = 80
"""From this request on, ``STALE``'s events count as stopped."""
UNHEALTHY = "10.0.0.3:8000"
REWEIGH_AT = 100
"""From this request on the engine's decisions change: one server's weight falls to 10 (its
prefixes lose their claim) and one turns unhealthy."""
BLOCK = 16
EVICT_OVER = 400
"""A server holding more blocks than this evicts its oldest, as vLLM's cache would."""
REQUESTS = 180


PICKER_DECISIONS = {
    "chat": {
        "10.0.0.1:8000": (80, 1.0, 1.0, 0.4),
        "10.0.0.2:8000": (60, 0.7, 3.0, 0.5),
        "10.0.0.3:8000": (50, 0.8, 0.0, 0.3),
        "10.0.0.4:8000": (40, 0.5, 2.0, 0.2),
        "10.0.0.5:8000": (70, 0.9, 1.0, 0.6),
        "10.0.0.6:8000": (55, 0.6, 0.0, 0.1),
    },
    "busy": {"10.0.3.1:8000": (50, 1.0, 9.0, 0.95), "10.0.3.2:8000": (50, 1.0, 12.0, 0.97)},
}
"""Pool -> address -> (weight, capacity factor, waiting, KV usage) as the engine decided; from
``REWEIGH_AT`` on, ``LOSES_WEIGHT``'s weight is 10 and ``UNHEALTHY`` is unhealthy."""
LOSES_WEIGHT = "10.0.0.2:8000"


class Request(NamedTuple):
    """One request of the sequence."""

    i: int
    pool: str
    kind: str
    body: bytes
    token_ids: list[int]
    """The prompt's ids as the tokenizer stand-in gives them (``w<id>`` -> id)."""
    elsewhere: bool
    """Envoy went down the fallback list: the request is served by the second named."""


def token_ids(messages: list[dict[str, str]]) -> list[int]:
    """The tokenizer stand-in: one id per word ``w<id>`` of every message."""
    return [int(w[1:]) for w in " ".join(m["content"] for m in messages).split()]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(f"w{rng.randrange(1, 50_000)}" for _ in range(n))


def requests() -> Iterator[Request]:
    """``REQUESTS`` requests: sessions growing turn by turn, shared system prompts, long and
    short prompts, some to the saturated pool, some no completion request at all."""
    rng = random.Random(4806)
    systems = [_words(random.Random(s), 300) for s in range(3)]
    sessions: list[list[str]] = [[] for _ in range(6)]
    for i in range(REQUESTS):
        roll = rng.random()
        pool = "chat"
        if roll < 0.35:
            kind = "session"
            s = rng.randrange(len(sessions))
            sessions[s].append(_words(rng, rng.choice((20, 120))))
            messages = [{"role": "system", "content": systems[s % 3]}] + [
                {"role": "user", "content": turn} for turn in sessions[s]
            ]
        elif roll < 0.65:
            kind = "shared_prefix"
            messages = [
                {"role": "system", "content": systems[rng.randrange(3)]},
                {"role": "user", "content": _words(rng, 30)},
            ]
        elif roll < 0.8:
            kind = "long"
            messages = [{"role": "user", "content": _words(rng, 2000)}]
        elif roll < 0.9:
            kind = "short"
            messages = [{"role": "user", "content": _words(rng, 8)}]
        elif roll < 0.97:
            kind = "saturated_pool"
            pool = "busy"
            messages = [{"role": "user", "content": _words(rng, 50)}]
        else:
            kind = "not_a_completion"
            messages = []
        body = (
            json.dumps({"model": "m", "messages": messages}).encode() if messages else b"{not json"
        )
        yield Request(i, pool, kind, body, token_ids(messages), elsewhere=rng.random() < 0.1)


@dataclass
class KvCache:
    """One vLLM server's KV cache as its events tell it: each prefill stores the blocks it
    lacks (``("stored", hash, parent hash, token ids)``), and past ``EVICT_OVER`` blocks the
    oldest go (``("removed", hashes)``)."""

    next_hash: int = 1
    blocks: dict[tuple[int, ...], int] = field(default_factory=dict)

    def prefill(self, ids: list[int]) -> list[tuple[object, ...]]:
        """The events of prefilling ``ids``."""
        events: list[tuple[object, ...]] = []
        parent: int | None = None
        for start in range(0, len(ids) - BLOCK + 1, BLOCK):
            prefix = tuple(ids[: start + BLOCK])
            known = self.blocks.get(prefix)
            if known is None:
                known = self.blocks[prefix] = self.next_hash
                self.next_hash += 1
                events.append(("stored", known, parent, ids[start : start + BLOCK]))
            parent = known
        if len(self.blocks) > EVICT_OVER:
            by_age = sorted(self.blocks.items(), key=lambda item: item[1])
            oldest = by_age[: len(self.blocks) - EVICT_OVER]
            for prefix, _ in oldest:
                del self.blocks[prefix]
            events.append(("removed", [h for _, h in oldest]))
        return events
