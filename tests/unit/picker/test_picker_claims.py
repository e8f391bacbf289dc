"""What the picker takes a server to hold: from its KV events when it publishes them (the
prompt's tokens known), from routing history otherwise, and nothing on a server with no prefix
cache."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from xds_control.config import Engine, parse_config
from xds_control.discovery import Endpoint
from xds_control.picker import Fleet, Picker
from xds_control.picker.cached_blocks import CachedBlocks
from xds_control.picker.prefix import TokenIds, Wanted, read_prompt
from xds_control.picker.tokenizer import CHUNK_CHARS, PromptTokenizer
from xds_control.signals.kv_wire import AllCleared, BlocksStored
from xds_lab.sim.tokenizer import write
from xds_lab.vocabulary import VOCABULARY

A, B, C = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"
CONFIG = parse_config(
    text=yaml.safe_dump(
        {
            "pools": [
                {
                    "name": "chat",
                    "picker": {"address": "127.0.0.1:9002"},
                    "endpoints": [{"address": a} for a in (A, B, C)],
                }
            ],
            "listeners": [
                {
                    "name": "gw",
                    "address": "127.0.0.1:10000",
                    "routes": [{"name": "r", "pool": "chat"}],
                }
            ],
        }
    )
)
WORDS = [f"w{i}" for i in range(256)]  # 256 words: 16 blocks of 16 tokens, 1 KiB of text


def _body(words: list[str]) -> bytes:
    return json.dumps({"prompt": " ".join(words), "max_tokens": 1}).encode()


def _tokenize(doc: Mapping[str, Any], /, *, wanted: Wanted | None = None) -> TokenIds:
    """A stand-in for the engine's tokenizer: one id per word."""
    return TokenIds(ids=[int(w[1:]) for w in str(doc["prompt"]).split()], share=1.0)


def _fleet(engines: dict[str, Engine | None]) -> Fleet:
    endpoints = {
        "chat": tuple(
            Endpoint(address=a, host=a.split(":")[0], port=8000, weight=10, engine=engines.get(a))
            for a in (A, B, C)
        )
    }
    return Fleet(config=lambda: CONFIG, endpoints=lambda: endpoints, decisions=dict)


def test_a_server_without_a_prefix_cache_is_never_taken_to_hold_a_prompt() -> None:
    picker = Picker(fleet=_fleet({A: Engine.ONNXRUNTIME}))
    body = _body(WORDS)
    prompt = read_prompt(body, prefix_bytes=256)
    assert prompt is not None
    assert picker.pick(pool="chat", body=body, subset=[A]).addresses == (A,)
    assert picker.pick(pool="chat", body=body, subset=[B]).addresses == (B,)
    state = picker._pools["chat"]
    assert set(state.index.matched(prompt.blocks)) == {B}
    # Even an entry from before (the engine label came later) claims nothing on it.
    state.index.put(prompt.blocks, A)
    assert set(picker._cached(state, pool="chat", prompt=prompt)) == {B}


def test_events_decide_for_servers_that_publish_them() -> None:
    blocks = CachedBlocks()
    picker = Picker(fleet=_fleet({}), cached_blocks=blocks, tokenizers=lambda pool: _tokenize)
    body = _body(WORDS)
    sent = picker.pick(pool="chat", body=body).addresses[0]  # routing history: `sent` holds it now
    # The server it went to publishes events, and they say it evicted the prompt; another
    # server's events say it holds the whole prompt.
    other = next(a for a in (A, B, C) if a != sent)
    blocks.apply(sent, [AllCleared()])
    ids = list(range(256))
    blocks.apply(
        other,
        [
            BlocksStored(
                block_hashes=list(range(16)), parent_block_hash=None, token_ids=ids, block_size=16
            )
        ],
    )
    assert picker.pick(pool="chat", body=body).addresses[0] == other


def test_without_token_ids_routing_history_decides() -> None:
    blocks = CachedBlocks()
    picker = Picker(fleet=_fleet({}), cached_blocks=blocks)  # no tokenizer
    body = _body(WORDS)
    sent = picker.pick(pool="chat", body=body).addresses[0]
    blocks.apply(sent, [AllCleared()])
    assert picker.pick(pool="chat", body=body).addresses[0] == sent


def test_a_server_whose_events_stopped_falls_back_to_routing_history() -> None:
    blocks = CachedBlocks()
    stopped: set[str] = set()
    picker = Picker(
        fleet=_fleet({}),
        cached_blocks=blocks,
        tokenizers=lambda pool: _tokenize,
        stale=lambda pool, address: address in stopped,
    )
    body = _body(WORDS)
    sent = picker.pick(pool="chat", body=body).addresses[0]
    blocks.apply(sent, [AllCleared()])  # its events say it holds nothing (any more)...
    stored = BlocksStored(
        block_hashes=[1], parent_block_hash=None, token_ids=list(range(16)), block_size=16
    )
    blocks.apply(next(a for a in (A, B, C) if a != sent), [stored])
    assert picker.pick(pool="chat", body=body).addresses[0] != sent
    stopped.add(sent)  # ...but they stopped: where the picker sent the prompt counts again
    assert picker.pick(pool="chat", body=body).addresses[0] == sent


def test_a_prompt_still_prefilling_is_claimed_until_its_server_answers() -> None:
    # Events follow the prefill: a second request with the prompt's prefix, picked before the
    # first's server has stored (and published) its blocks, goes where the first went.
    blocks = CachedBlocks()
    picker = Picker(fleet=_fleet({}), cached_blocks=blocks, tokenizers=lambda pool: _tokenize)
    for address in (A, B, C):
        blocks.apply(address, [AllCleared()])  # all three publish events...
    other = BlocksStored(
        block_hashes=[7], parent_block_hash=None, token_ids=list(range(900, 916)), block_size=16
    )
    blocks.apply(C, [other])  # ...and hold nothing of the prompt
    first = picker.pick(pool="chat", body=_body(WORDS), request="first").addresses[0]
    for k in range(4):  # other prompts, first words apart
        again = picker.pick(pool="chat", body=_body([*WORDS[:200], f"x{k}"]), request=k)
        assert again.addresses[0] == first
    # Answered: the claim is over, and the events (which say nothing is held) decide.
    for request in ("first", 0, 1, 2, 3):
        picker.served(pool="chat", request=request, address=first)
    state = picker._pools["chat"]
    assert len(state.ledger) == 0
    prompt = read_prompt(_body(WORDS), prefix_bytes=256, tokenize=_tokenize)
    assert prompt is not None
    assert picker._cached(state, pool="chat", prompt=prompt) == {}


def test_a_pick_encodes_the_prompt_only_as_far_as_some_server_holds_it(tmp_path: Path) -> None:
    # A known system prompt held by one server, then a long question nobody holds: the pick
    # finds the holder from the first piece past the held blocks and encodes no further, and
    # still counts the prompt's tokens near their number.
    directory = write(tmp_path / "model")
    engine = PromptTokenizer.load(directory)  # the server's side: the whole prompt
    rng = random.Random(5)
    system = " ".join(rng.choices(VOCABULARY, k=250))
    question = " ".join(rng.choices(VOCABULARY, k=250))
    doc = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]
    }
    assert engine.template is not None
    rendered = engine.template.render(
        messages=doc["messages"], add_generation_prompt=True, **engine.specials
    )
    whole = engine.tokenizer.encode(rendered, add_special_tokens=False)  # no pick's budget
    held_ids = list(whole.ids[: len(whole.ids) // 2 // 16 * 16])  # about the system prompt
    blocks = CachedBlocks()
    for address in (A, B, C):
        blocks.apply(address, [AllCleared()])
    blocks.apply(
        B,
        [
            BlocksStored(
                block_hashes=list(range(len(held_ids) // 16)),
                parent_block_hash=None,
                token_ids=held_ids,
                block_size=16,
            )
        ],
    )
    tokenizer = PromptTokenizer.load(directory, warm=False)  # what the pick itself encodes
    picker = Picker(
        fleet=_fleet({}), cached_blocks=blocks, tokenizers=lambda pool: tokenizer.token_ids
    )
    assert picker.pick(pool="chat", body=json.dumps(doc).encode()).addresses[0] == B
    text_pieces = len(json.dumps(doc)) // CHUNK_CHARS
    assert 1 <= len(tokenizer._pieces) < text_pieces  # not every piece was encoded
    prompt = read_prompt(json.dumps(doc).encode(), prefix_bytes=256, tokenize=tokenizer.token_ids)
    assert prompt is not None
    assert abs(prompt.tokens - len(whole.ids)) < 0.1 * len(whole.ids)
