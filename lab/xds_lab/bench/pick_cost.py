"""What one pick costs inside the picker with the model's tokenizer, by prompt size: the body's
JSON parse, the chat template, the tokenizer, the block chains, the lookups in the index from
events and in the routing history, and the rank (no gRPC, no Envoy: those are
``picker_latency``'s).

    python -m xds_lab.bench.pick_cost [--picks 300]

Arms: no tokenizer (today's bytes / 4 path); the lab's word-level tokenizer on lab prompts
(the simulator's rule); and a byte-level BPE of 32k tokens, trained here with ``tokenizers``
on the Python standard library's sources (English and code, like a real model's BPE) on
prompts of that text. Eight servers. Two shapes of prompt:

- ``new question``: a system prompt shared by all, then a question of its own of the same
  length; the servers hold the shared half by their events (each a longer share of it), so
  every pick matches blocks and meets half its text for the first time.
- ``held, unseen``: prompts of their own, each one's first three quarters held by one server
  (its events), which this picker's tokenizer never encoded: the worst steady case (a
  conversation's next turn whose earlier turns another replica picked, or a replica just
  started), where a pick encodes up to its budget of held text.

Each tokenizer cell runs twice: the pick alone (``warm=False``), and with the worker's warm-up
of what a pick stopped short of (the default), which here is busy all the time, since every
pick of the table leaves new text: the worst case of its share of the two cores.

Prints p50/p99 per arm, shape and prompt size.
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
from xds_control.picker.cached_blocks import CachedBlocks
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


def _words_for(tokens: int, *, probe: str, tokenizer: PromptTokenizer | None) -> int:
    """How many words make about ``tokens`` tokens, counted on ``probe`` (1,000 words): words
    per token differ by tokenizer."""
    found = tokenizer.token_ids({"prompt": probe}) if tokenizer is not None else None
    per_word = (len(found.ids) / found.share if found else len(probe.encode()) / 4) / 1_000
    return int(tokens / per_word)


def _prompts(
    text: str, *, tokenizer: PromptTokenizer | None, size: int, count: int
) -> list[dict[str, Any]]:
    """``count`` chat bodies of about ``size`` tokens: a shared first half, then their own."""
    rng = random.Random(size)
    words = text.split(" ")

    def chunk(n: int) -> str:
        start = rng.randrange(0, max(1, len(words) - n))
        return " ".join(words[start : start + n])

    half = _words_for(size // 2, probe=chunk(1_000), tokenizer=tokenizer)
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


def _unseen(
    text: str, *, tokenizer: PromptTokenizer | None, size: int, count: int
) -> list[dict[str, Any]]:
    """``count`` chat bodies of about ``size`` tokens, each of its own (no shared part)."""
    rng = random.Random(size + 1)
    words = text.split(" ")
    n = _words_for(size, probe=" ".join(words[:1_000]), tokenizer=tokenizer)
    bodies = []
    for _ in range(count):
        start = rng.randrange(0, max(1, len(words) - n))
        bodies.append(
            {"messages": [{"role": "user", "content": " ".join(words[start : start + n])}]}
        )
    return bodies


def _engine_ids(engine: PromptTokenizer, body: dict[str, Any]) -> list[int]:
    """All of ``body``'s ids, as the engine encodes its whole prompt (no budget)."""
    assert engine.template is not None
    text = engine.template.render(
        messages=body["messages"], add_generation_prompt=True, **engine.specials
    )
    return list(engine.tokenizer.encode(text, add_special_tokens=False).ids)


def _cache(blocks: CachedBlocks, server: str, ids: Sequence[int], *, first: int) -> None:
    whole = len(ids) // 16 * 16
    blocks.apply(
        server,
        [
            BlocksStored(
                block_hashes=list(range(first, first + whole // 16)),
                parent_block_hash=None,
                token_ids=list(ids[:whole]),
                block_size=16,
            )
        ],
    )


def _measure(
    *,
    tokenizer: PromptTokenizer | None,
    engine: PromptTokenizer | None,
    bodies: Sequence[dict[str, Any]],
    unseen: bool,
) -> tuple[list[float], float]:
    """Time a pick of each body; ``engine`` is a second copy of the tokenizer, standing for
    the servers (what it encodes warms no cache of the picker's)."""
    cached = CachedBlocks()
    if engine is not None and unseen:  # each body's first three quarters cached on one server
        for k, doc in enumerate(bodies):
            whole = _engine_ids(engine, doc)
            _cache(cached, _SERVERS[k % len(_SERVERS)], whole[: len(whole) * 3 // 4], first=k << 20)
    elif engine is not None:  # every server holds a share of the shared half, by its events
        ids = _engine_ids(engine, bodies[0])
        shared = ids[: len(ids) // 2]
        for n, server in enumerate(_SERVERS):
            _cache(cached, server, shared[: len(shared) * (n + 1) // len(_SERVERS)], first=n << 20)
    picker = Picker(
        fleet=_fleet(),
        cached_blocks=cached,
        tokenizers=(lambda _pool: tokenizer.token_ids) if tokenizer is not None else None,
    )
    encoded = [json.dumps(b).encode() for b in bodies]
    if not unseen:
        for raw in encoded[:20]:  # warm-up
            picker.pick(pool="chat", body=raw)
    times = []
    for raw in encoded:
        start = time.perf_counter()
        assert picker.pick(pool="chat", body=raw)
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
        words_dir = write(Path(tmp) / "words")
        bpe_dir = _bpe(Path(tmp) / "bpe", corpus)
        arms = (
            ("no tokenizer (bytes / 4)", None, corpus),
            ("lab word-level", words_dir, lab_text),
            ("byte-level BPE, 32k", bpe_dir, corpus),
        )
        for name, directory, text in arms:
            for shape, make in (("new question", _prompts), ("held, unseen", _unseen)):
                for size in _SIZES:
                    # A fresh tokenizer per cell: no cell warms another's cache of pieces.
                    engine = PromptTokenizer.load(directory, warm=False) if directory else None
                    bodies = make(text, tokenizer=engine, size=size, count=picks)
                    cells = [f"{size:,}", ""]
                    figures: dict[str, float] = {}
                    for warm in (False, True):
                        if directory is None and warm:
                            cells += ["", ""]
                            continue
                        tokenizer = (
                            PromptTokenizer.load(directory, warm=warm) if directory else None
                        )
                        times, mean_bytes = _measure(
                            tokenizer=tokenizer,
                            engine=engine,
                            bodies=bodies,
                            unseen=make is _unseen,
                        )
                        if tokenizer is not None:
                            tokenizer.settle()
                        p50, p99 = percentile(times, 50) * 1e3, percentile(times, 99) * 1e3
                        cells[1] = f"{mean_bytes / 1024:.0f}"
                        cells += [f"{p50:.2f}", f"{p99:.2f}"]
                        on = "_warm" if warm else ""
                        figures |= {
                            f"p50{on}_ms": p50,
                            f"p99{on}_ms": p99,
                            "body_bytes": mean_bytes,
                        }
                    rows.append([name, shape, *cells])
                    summary[f"{name} {shape} {size}"] = figures
    run.finish(
        title="One pick's cost with the model's tokenizer: measured",
        what=f"{picks} picks per arm and size, in one process, eight servers.",
        body=[
            markdown_table(
                header=[
                    "arm",
                    "prompt",
                    "prompt tokens",
                    "body KiB",
                    "p50 ms",
                    "p99 ms",
                    "p50 ms, warm-up on",
                    "p99 ms, warm-up on",
                ],
                rows=rows,
            )
        ],
        summary={"cells": summary},
    )


if __name__ == "__main__":
    main()
