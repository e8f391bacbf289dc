"""The lab's model tokenizer: the simulator's word rule (``xds_lab.sim.tokens``) as a real
``tokenizers`` file and chat template, the way a model repository ships them.

A server tokenizes with it (the token ids of its KV-cache events and of ``/tokenize``), and
the picker is pointed at the directory ``write`` fills (``pools[].picker.tokenizer``), so both
sides cut a prompt into the same ids through the same library as with a real model. The model
is word-level: one whitespace-separated word is one token, so every count, capacity and
baseline of the lab stays what ``tokens.py`` says. The vocabulary is the load generator's
words, the role markers and the simulator's output words; any other word is ``[UNK]`` (one
token still, but two prompts of such words get the same ids: the servers' own prefix cache
tells them apart, a reader of their events cannot).

The chat template puts each message's role marker before its words, as ``chat_tokens`` does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

from xds_lab.sim.tokens import OUTPUT_WORDS, ROLES
from xds_lab.vocabulary import VOCABULARY

__all__ = ["CHAT_TEMPLATE", "UNKNOWN", "build", "encode", "write"]

UNKNOWN = "[UNK]"

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<{{ message.get('role', 'user') }}> "
    "{%- if message['content'] is string %} {{ message['content'] }}"
    "{%- else %}{% for part in message['content'] %}"
    "{%- if part['text'] is string %} {{ part['text'] }}{% endif %}"
    "{%- endfor %}{% endif %} "
    "{% endfor -%}"
)
"""Jinja, as a model's ``tokenizer_config.json`` carries it: no generation prompt, no BOS
(the simulator's rule has neither)."""


def build() -> Tokenizer:
    """The word-level tokenizer: ``[UNK]`` is id 0, then the role markers, then the words."""
    words = [UNKNOWN, *(f"<{r}>" for r in ROLES), *VOCABULARY, *OUTPUT_WORDS]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


@functools.cache
def _shared() -> Tokenizer:
    return build()


@functools.cache
def _vocabulary() -> dict[str, int]:
    return _shared().get_vocab()


def encode(words: Sequence[str]) -> list[int]:
    """Token ids of a prompt already cut into words (``chat_tokens``, ``text_tokens``): the
    tokenizer's own vocabulary, looked up word by word as its word-level model does (the
    library's call costs 30 ms for 16,000 words; the servers tokenize every request)."""
    vocab = _vocabulary()
    unknown = vocab[UNKNOWN]
    return [vocab.get(w, unknown) for w in words]


def write(directory: Path) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory`` (made if
    missing), as a model repository holds them; returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    _shared().save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "bos_token": None,
        "eos_token": None,
        "unk_token": UNKNOWN,
        "model_max_length": 131_072,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return directory
