"""The picker's tokenizer cuts a request into the ids the engine would: the model's chat
template rendered as vLLM renders it, encoded with the model's ``tokenizer.json``; a
directory that cannot be used says which file and why, and the shelf keeps picking without it."""

from __future__ import annotations

import asyncio
import json
import random
import sysconfig
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from xds_control.picker.tokenizer import (
    BUDGET_CHARS,
    PromptTokenizer,
    TokenizerError,
    TokenizerShelf,
)
from xds_lab.sim.tokenizer import encode, write
from xds_lab.sim.tokens import chat_tokens, text_tokens

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "kakaka lololo mimimi"},
    {"role": "user", "content": [{"type": "text", "text": "nenene"}, {"type": "image_url"}]},
]


def _model(directory: Path, *, template: str | None, **config: object) -> Path:
    """A model directory with a word-level tokenizer over a few words and special tokens."""
    words = ["[UNK]", "<s>", "</s>", "<|user|>", "<|system|>", "<|assistant|>", "a", "b", "c"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    if template is not None:
        config["chat_template"] = template
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


def _ids(tokenizer: PromptTokenizer, doc: dict[str, Any]) -> list[int] | None:
    found = tokenizer.token_ids(doc)
    if found is None:
        return None
    assert found.share == 1.0
    return list(found.ids)


def test_the_labs_model_gives_the_simulators_own_ids(tmp_path: Path) -> None:
    tokenizer = PromptTokenizer.load(write(tmp_path / "model"))
    assert _ids(tokenizer, {"messages": MESSAGES}) == encode(chat_tokens(MESSAGES))
    prompt = "kakaka lololo somethingelse"
    assert _ids(tokenizer, {"prompt": prompt}) == encode(text_tokens(prompt))
    assert _ids(tokenizer, {"prompt": ["kakaka ", "lololo"]}) == encode(["kakaka", "lololo"])
    assert tokenizer.token_ids({"input": "kakaka"}) is None  # no completion request


def test_a_template_reads_special_tokens_and_the_generation_prompt(tmp_path: Path) -> None:
    template = (
        "{{ bos_token }} {% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} "
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    directory = _model(
        tmp_path / "model",
        template=template,
        bos_token={"__type": "AddedToken", "content": "<s>"},  # as older configs write it
    )
    tokenizer = PromptTokenizer.load(directory)
    # A template that does not loop over content gets the text parts joined, as vLLM does.
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a b"}]}]}
    assert _ids(tokenizer, body) == [1, 3, 6, 7, 5]


def test_a_chat_template_file_wins_over_the_config(tmp_path: Path) -> None:
    directory = _model(tmp_path / "model", template="c")
    (directory / "chat_template.jinja").write_text("{% for m in messages %}a {% endfor %}")
    tokenizer = PromptTokenizer.load(directory)
    assert _ids(tokenizer, {"messages": [{"role": "user", "content": "b"}] * 2}) == [6, 6]


def test_without_a_template_only_completions_get_ids(tmp_path: Path) -> None:
    tokenizer = PromptTokenizer.load(_model(tmp_path / "model", template=None))
    assert tokenizer.token_ids({"messages": MESSAGES}) is None
    assert _ids(tokenizer, {"prompt": "a b zz"}) == [6, 7, 0]


def test_a_template_that_refuses_a_request_gives_no_ids(tmp_path: Path) -> None:
    template = (
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}a"
    )
    tokenizer = PromptTokenizer.load(_model(tmp_path / "model", template=template))
    assert _ids(tokenizer, {"messages": [{"role": "user", "content": "b"}]}) == [6]
    assert tokenizer.token_ids({"messages": [{"role": "system", "content": "b"}]}) is None


def test_a_directory_that_cannot_be_used_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match=r"tokenizer\.json"):
        PromptTokenizer.load(tmp_path)
    broken = _model(tmp_path / "model", template="{% for %}")
    with pytest.raises(TokenizerError, match="chat template does not compile"):
        PromptTokenizer.load(broken)


async def test_the_shelf_loads_off_the_loop_and_retries_a_directory_that_failed(
    tmp_path: Path,
) -> None:
    now = [0.0]
    shelf = TokenizerShelf(clock=lambda: now[0])
    directory = tmp_path / "model"
    assert shelf.get(str(directory)) is None  # not there yet: a load starts, and fails
    for _ in range(100):
        if shelf.failures():
            break
        await asyncio.sleep(0.01)
    assert "tokenizer.json" in shelf.failures()[str(directory)]
    write(directory)  # the mount arrives
    assert shelf.get(str(directory)) is None  # not tried again before 30 s
    now[0] = 31.0
    assert shelf.get(str(directory)) is None  # tried again, in the background
    for _ in range(100):
        if (found := shelf.get(str(directory))) is not None:
            break
        await asyncio.sleep(0.01)
    assert found is not None
    assert shelf.failures() == {}


def _byte_level_bpe(directory: Path, *, warm: bool = True) -> PromptTokenizer:
    """A byte-level BPE (GPT-2's pre-tokenizer) trained on the standard library's sources."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus = "\n".join(p.read_text(errors="replace") for p in sorted(stdlib.glob("a*.py")))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator([corpus], trainer=trainers.BpeTrainer(vocab_size=4_000))
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    return PromptTokenizer.load(directory, warm=warm)


def test_pieces_encode_as_the_whole_text_and_a_long_one_is_covered_over_picks(
    tmp_path: Path,
) -> None:
    tokenizer = _byte_level_bpe(tmp_path / "bpe")
    assert tokenizer.pieces  # the check at load found pieces agree
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    whole = tokenizer.tokenizer.encode(text, add_special_tokens=False).ids
    rng = random.Random(0)
    for _ in range(30):  # texts that share prefixes, of every size within the budget
        start = rng.choice((0, 0, 5_000, rng.randrange(len(text) // 2)))
        piece = text[start : start + rng.randrange(50, BUDGET_CHARS)]
        expected = tokenizer.tokenizer.encode(piece, add_special_tokens=False).ids
        assert list(tokenizer.encode(piece).ids) == expected
    # A text past the budget: its first ids now, more of them on each later sight.
    shares = []
    for _ in range(len(text) // (BUDGET_CHARS // 2) + 2):  # each sight at least half more
        found = tokenizer.encode(text)
        assert list(found.ids) == whole[: len(found.ids)]
        shares.append(found.share)
        if found.share == 1.0:
            break
    assert shares[0] < 1.0
    assert shares == sorted(set(shares))  # every sight covers more
    assert shares[-1] == 1.0


def test_with_wanted_a_piece_is_encoded_only_while_the_ids_before_it_matter(
    tmp_path: Path,
) -> None:
    tokenizer = _byte_level_bpe(tmp_path / "bpe", warm=False)
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()[:BUDGET_CHARS]
    whole = tokenizer.tokenizer.encode(text, add_special_tokens=False).ids
    asked: list[int] = []

    def up_to(n: int) -> Callable[[Sequence[int]], bool]:
        def wanted(ids: Sequence[int]) -> bool:
            asked.append(len(ids))
            return len(ids) < n

        return wanted

    # Only the first ids matter: the first piece is encoded, then the question stops it.
    first = tokenizer.encode(text, wanted=up_to(1))
    assert asked == [len(first.ids)]
    assert 0 < first.share < 1.0
    assert list(first.ids) == whole[: len(first.ids)]
    # Wanted further: the piece it has is not encoded again, the next ones are, one by one.
    asked.clear()
    more = tokenizer.encode(text, wanted=up_to(len(first.ids) + 1))
    assert first.share < more.share
    assert list(more.ids) == whole[: len(more.ids)]
    # The first piece came from the cache, unasked; then one question before each new one.
    assert asked[0] == len(first.ids)
    assert asked == sorted(set(asked))
    assert len(asked) == 2  # asked before the second piece (yes) and the third (no)
    # Wanted throughout: the whole text, as without the question.
    assert list(tokenizer.encode(text, wanted=lambda ids: True).ids) == whole


def test_what_a_pick_stopped_short_of_is_encoded_in_the_background(tmp_path: Path) -> None:
    tokenizer = _byte_level_bpe(tmp_path / "bpe")
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()[: 4 * BUDGET_CHARS]
    whole = tokenizer.tokenizer.encode(text, add_special_tokens=False).ids
    first = tokenizer.encode(text, wanted=lambda ids: False)
    assert first.share < 0.1
    tokenizer.settle()
    # The next request with the text (a next turn) finds all of it encoded, past the budget.
    encoded: list[str] = []
    plain = tokenizer._encode

    def counting(texts: list[str]) -> list[list[int]]:
        encoded.extend(texts)
        return plain(texts)

    tokenizer._encode = counting  # type: ignore[method-assign]
    again = tokenizer.encode(text)
    assert again.share == 1.0
    assert list(again.ids) == whole
    assert encoded == []
