"""What one pick costs inside the picker with the model's tokenizer, by prompt size: the body's
JSON parse, the chat template, the tokenizer, the block chains, the lookups in the index from
events and in the routing history, and the rank (no gRPC, no Envoy: those are
``picker_latency``'s).

    python -m xds_lab.bench.pick_cost [--picks 300]

Arms: no tokenizer (today's bytes / 4 path); the lab's word-level tokenizer on lab prompts
(the simulator's rule); and a byte-level BPE of 32k tokens, trained here with ``tokenizers``
on the Python standard library's sources (English and code, like a real model's BPE) on
prompts of that text. Eight servers, each holding the prompts' shared first half by its
events, so every pick matches blocks. Prints p50/p99 per arm and prompt size.
"""

from __future__ import annotations

import json
import random
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from xds_control.config import parse_config
from xds_control.discovery import Endpoint
from xds_control.picker import Fleet, Picker
from xds_control.picker.held import HeldBlocks
from xds_control.picker.tokenizer import PromptTokenizer
from xds_control.signals.kv_wire import BlocksStored
from xds_lab.bench import entry
from xds_lab.bench.tables import markdown_table
from xds_lab.loadgen import percentile
from xds_lab.sim.tokenizer import write
from xds_lab.vocabulary import VOCABULARY

__all__ = ["main"]

_SERVERS = [f"10.0.0.{i}:8000" for i in range(1, 9)]
_SIZES = (2_048, 16_384)
_BPE_TEMPLATE = (
    "<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
"""Llama 3's template, in short."""


def _corpus() -> str:
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(errors="replace") for p in sorted(root.glob("*.py"))]
    return "\n".join(texts)


def _bpe(directory: Path, corpus: str) -> Path:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(vocab_size=32_000, special_tokens=specials)
    tokenizer.train_from_iterator([corpus], trainer=trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"chat_template": _BPE_TEMPLATE}))
    return directory


def _fleet() -> Fleet:
    doc = {
        "pools": [
            {
                "name": "chat",
                "picker": {"address": "127.0.0.1:9002", "max_body_bytes": 1_048_576},
                "endpoints": [{"address": a} for a in _SERVERS],
            }
        ],
        "listeners": [
            {"name": "gw", "address": "127.0.0.1:10000", "routes": [{"name": "r", "pool": "chat"}]}
        ],
    }
    config = parse_config(text=yaml.safe_dump(doc))
    endpoints = {
        "chat": tuple(
            Endpoint(address=a, host=a.split(":")[0], port=8000, weight=10) for a in _SERVERS
        )
    }
    return Fleet(config=lambda: config, endpoints=lambda: endpoints, decisions=dict)


def _prompts(
    text: str, *, tokenizer: PromptTokenizer | None, size: int, count: int
) -> list[dict[str, Any]]:
    """``count`` chat bodies of about ``size`` tokens: a shared first half, then their own."""
    rng = random.Random(size)
    words = text.split(" ")

    def chunk(n: int) -> str:
        start = rng.randrange(0, max(1, len(words) - n))
        return " ".join(words[start : start + n])

    # Words per token differ by tokenizer: size the text by counting.
    probe = chunk(1_000)
    found = tokenizer.token_ids({"prompt": probe}) if tokenizer is not None else None
    per_word = (len(found.ids) / found.share if found else len(probe.encode()) / 4) / 1_000
    half = int(size / 2 / per_word)
    shared = chunk(half)
    return [
        {
            "messages": [
                {"role": "system", "content": shared},
                {"role": "user", "content": chunk(half)},
            ]
        }
        for _ in range(count)
    ]


def _measure(
    *, tokenizer: PromptTokenizer | None, bodies: Sequence[dict[str, Any]]
) -> tuple[list[float], float]:
    held = HeldBlocks()
    if tokenizer is not None:  # every server holds the shared half, by its events
        found = tokenizer.token_ids(bodies[0])
        ids = list(found.ids) if found is not None else []
        shared = ids[: len(ids) // 2 // 16 * 16]
        for n, server in enumerate(_SERVERS):
            stored = BlocksStored(
                block_hashes=list(range(n * 10_000, n * 10_000 + len(shared) // 16)),
                parent_block_hash=None,
                token_ids=shared[: len(shared) * (n + 1) // len(_SERVERS) // 16 * 16],
                block_size=16,
            )
            held.apply(server, [stored])
    picker = Picker(
        fleet=_fleet(),
        held=held,
        tokenizers=(lambda _pool: tokenizer.token_ids) if tokenizer is not None else None,
    )
    encoded = [json.dumps(b).encode() for b in bodies]
    for body in encoded[:20]:  # warm-up
        picker.pick(pool="chat", body=body)
    times = []
    for body in encoded:
        start = time.perf_counter()
        assert picker.pick(pool="chat", body=body)
        times.append(time.perf_counter() - start)
    return times, sum(len(b) for b in encoded) / len(encoded)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the table and the machine, write JSON and Markdown."""
    parser = entry.parser("pick_cost", __doc__, out=entry.DOCS_BENCH)
    parser.add_argument("--picks", type=int, default=300, help="picks per arm and size")
    run = entry.start(parser, argv, envoy=False)
    picks: int = run.args.picks
    corpus = _corpus()
    lab_text = " ".join(random.Random(0).choices(VOCABULARY, k=200_000))
    rows, summary = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-pick-") as tmp:
        words = PromptTokenizer.load(write(Path(tmp) / "words"))
        bpe = PromptTokenizer.load(_bpe(Path(tmp) / "bpe", corpus))
        arms = (
            ("no tokenizer (bytes / 4)", None, corpus),
            ("lab word-level", words, lab_text),
            ("byte-level BPE, 32k", bpe, corpus),
        )
        for name, tokenizer, text in arms:
            for size in _SIZES:
                bodies = _prompts(text, tokenizer=tokenizer, size=size, count=picks)
                times, mean_bytes = _measure(tokenizer=tokenizer, bodies=bodies)
                p50, p99 = percentile(times, 50) * 1e3, percentile(times, 99) * 1e3
                rows.append(
                    [name, f"{size:,}", f"{mean_bytes / 1024:.0f}", f"{p50:.2f}", f"{p99:.2f}"]
                )
                summary[f"{name} {size}"] = {"p50_ms": p50, "p99_ms": p99, "body_bytes": mean_bytes}
    run.finish(
        title="One pick's cost with the model's tokenizer: measured",
        what=f"{picks} picks per arm and size, in one process, eight servers.",
        body=[
            markdown_table(
                header=["arm", "prompt tokens", "body KiB", "p50 ms", "p99 ms"], rows=rows
            )
        ],
        summary={"cells": summary},
    )


if __name__ == "__main__":
    main()
