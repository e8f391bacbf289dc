"""Make the lab's tiny vLLM model from nothing downloaded: a byte-level BPE tokenizer trained on
text the lab generates, and a 2-layer Llama with seeded random weights, saved as a model
repository holds them (``config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``).

Run with the vLLM tools venv's Python (it needs torch, transformers and tokenizers, which the
project's own venv does not carry)::

    python lab/xds_lab/real_engine/make_model.py OUT_DIR

Deterministic: the same script makes the same files, so the folder is cached by this file's
hash (``xds_lab.real_engine.install``). The shape is what vLLM's CPU attention backend takes:
a head size of 64 (16 is refused); one KV head keeps a block of 128 tokens at 16 KB a layer.
The answers are noise; what the tests read is how vLLM tokenizes, blocks, caches, counts and
reports, none of which depends on the weights.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VOCAB_SIZE = 2048
SEED = 0
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "da", "ho")
# The lab's prompt words (xds_lab.vocabulary, repeated here: this script runs in the vLLM
# venv, where the lab is not installed) and plain English for the conformance probes.
_WORDS = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
_ENGLISH = (
    "the quick brown fox jumps over the lazy dog while a server answers every request with "
    "tokens from its cache and the router sends each prompt where its prefix is held "
    "hello world what is the capital of france say something short please count to ten"
)
SPECIALS = ["<|begin|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|pad|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }} {{ message['content'] }}{{ eos_token }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""Content as one text (vLLM's "auto" format hands a string to a template that does not loop
over parts); a BOS first, as most chat models write it."""


def corpus(lines: int = 20_000) -> list[str]:
    """Seeded sentences of the lab's words and some English."""
    pick = random.Random(SEED)
    words = _WORDS + _ENGLISH.split() * 20
    return [" ".join(pick.choice(words) for _ in range(pick.randint(4, 24))) for _ in range(lines)]


def make_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    bos = tokenizer.token_to_id("<|begin|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin|> $A", pair="<|begin|> $A <|begin|> $B", special_tokens=[("<|begin|>", bos)]
    )
    tokenizer.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin|>",
        "eos_token": "<|end|>",
        "pad_token": "<|pad|>",
        "model_max_length": 2048,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def make_model(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = Tokenizer.from_file(str(out / "tokenizer.json"))
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.token_to_id("<|begin|>"),
        eos_token_id=tokenizer.token_to_id("<|end|>"),
        pad_token_id=tokenizer.token_to_id("<|pad|>"),
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    make_tokenizer(out)
    make_model(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
