"""A request's prompt as the serving engine cuts it into token ids, from the model's own
tokenizer files.

vLLM and SGLang turn a chat request into text with the model's chat template (Jinja) and
encode that text without adding special tokens (the template writes them itself); a
completion's ``prompt`` is encoded with them. The picker does the same, from a copy of the
model repository's ``tokenizer.json`` and its chat template (``chat_template.jinja``, else
``tokenizer_config.json``'s ``chat_template``) that the operator mounts: nothing is downloaded.
The ids then key the prompt's blocks the way the engine's KV events key what it holds
(``picker/cached_blocks.py``), and count its tokens exactly.

How vLLM hands message contents to a template: a template that loops over a message's
``content`` gets OpenAI's list of parts; any other gets the text parts joined by newlines
(vLLM's "auto" content format).

**Bounded work per pick.** Encoding is the costly part (on this project's VM the library takes
about 1 ms per 2,000 tokens, 10-20 ms for 16,000), and picks run on the event loop. So the
rendered text is cut into pieces of about ``CHUNK_CHARS`` characters, each ending before a
single space that starts a word, and each piece is encoded alone and kept (least recently used
dropped first), keyed by everything up to its end: a shared system prompt or a conversation's
earlier turns are encoded once. A pick encodes at most ``BUDGET_CHARS`` characters of pieces it
has not seen (a piece longer than what is left of them is not begun: code indented by runs of
spaces can go 3,000 characters without a place to cut); past them it has the prompt's first ids
only (what prefix matching reads first) and estimates the rest of the count. And it encodes a
piece not seen only while the ids before it may still matter (``wanted``: the picker asks
whether some server holds every block so far; past the first block none holds, no later block
can match, since keys chain), so a new question after a known system prompt costs one piece, not
the question; the rest of the count is estimated from the characters per token of what was
encoded. What a pick stopped short of (up to ``WARM_CHARS``) is then encoded in a worker thread,
off the pick's path (the library lets go of the GIL while it encodes), so that the next request
with the text, a conversation's next turn, finds it encoded: without that, the next turn's pick
would have to encode the whole of this turn's new text, past its budget.

Cutting where a word starts gives the ids of the whole text for tokenizers that split words at
spaces before they merge (byte-level BPE, SentencePiece, word-level); ``load`` checks that on
a sample and encodes whole texts (up to the budget) for a tokenizer where it does not hold.

``PromptTokenizer`` is pure but for that cache and its warm-up worker; ``TokenizerShelf`` loads
each directory once, off the event loop, and retries one that failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jinja2
import structlog
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from xds_control.picker.prefix import TokenIds, Wanted

__all__ = [
    "BUDGET_CHARS",
    "CHUNK_CHARS",
    "WARM_CHARS",
    "PromptTokenizer",
    "TokenizerError",
    "TokenizerShelf",
]

CHUNK_CHARS = 1024
"""Characters per piece the cache keeps (a piece ends at the first word start past this)."""
BUDGET_CHARS = 3072
"""Characters of new pieces one pick encodes at most: two pieces, about 750 tokens of English,
0.3 ms of a byte-level BPE on the benchmark's VM. At 4,096 (three pieces) the pick's p99 at
2,048 tokens passed 1 ms (docs/benchmarks.md, ``pick_cost``)."""
WARM_CHARS = 65_536
"""Characters past where a pick stopped that the worker encodes, for the next request with the
text: a conversation's next turn repeats this one, which its pick then finds encoded."""
_WARMING = 2
"""Warm-ups queued at most; a pick past them warms nothing (the worker is behind)."""
_CACHED_PIECES = 20_000
"""Pieces kept, about 20 MB of text and its ids."""
_SAMPLE = (
    "The quick brown fox, who was 12345 days old, jumped over the lazy dog.  Twice!\n"
    "def main() -> None:\n    print('hello, world')  # a comment\n\n"
    "Ünïcödé text, emoji 🙂 and numbers 3.14159 follow: [1, 2, 3] {'a': \"b\"}. "
) * 12
"""What ``load`` cuts into pieces to check that pieces encode as the whole text does."""

log = structlog.get_logger(__name__)

_LOOPS_OVER_CONTENT = re.compile(r"for\s+\w+\s+in\s+\w+(\[['\"]content['\"]\]|\.content\b)")
_SPECIALS = ("bos_token", "eos_token", "unk_token", "pad_token")
_RETRY_S = 30.0
"""A directory that failed to load is tried again after this long (a mount that was late)."""


class TokenizerError(Exception):
    """A tokenizer directory that cannot be used; the message names the file and why."""


def _special(value: object) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: a string, or an AddedToken."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _template_source(directory: Path, config: Mapping[str, Any]) -> str | None:
    jinja_file = directory / "chat_template.jinja"
    if jinja_file.is_file():
        return jinja_file.read_text()
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one serves chat
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def _raise(message: str) -> None:
    raise jinja2.TemplateError(message)


def _compile(source: str) -> jinja2.Template:
    # As Hugging Face renders chat templates: sandboxed, blocks trimmed, loop controls.
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    return env.from_string(source)


def _as_text(content: object) -> object:
    if isinstance(content, list):
        return "\n".join(
            str(p["text"])
            for p in content
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return content


def _after(head: Sequence[int], wanted: Wanted) -> Wanted:
    """``wanted`` for ids that follow ``head`` (a completion's BOS): the prompt's begin so."""
    return lambda ids: wanted([*head, *ids])


_WORD_START = re.compile(r"(?<=\S) (?=\S)")
"""A single space between two characters that are not spaces: where a word starts."""


def _cuts(text: str, *, start: int, size: int) -> int:
    """Where the piece from ``start`` ends: before the first single space past ``start +
    size`` that starts a word (the text's end if there is none)."""
    # One regular expression, not a loop over spaces: code indented by runs of spaces has
    # thousands of spaces between two that qualify.
    found = _WORD_START.search(text, start + size)
    return len(text) if found is None else found.start()


def _walk(
    text: str, *, start: int, chain: hashlib.blake2b
) -> Iterator[tuple[int, int, bytes, hashlib.blake2b]]:
    """``text``'s pieces from ``start``: each one's start, end, cache key (everything up to
    its end, continuing ``chain``) and the key's hash to continue from."""
    while start < len(text):
        end = _cuts(text, start=start, size=CHUNK_CHARS)
        chain = chain.copy()
        chain.update(text[start:end].encode())
        yield start, end, chain.digest(), chain
        start = end


class PromptTokenizer:
    """One model's tokenizer and chat template, with the cache of pieces it encoded."""

    def __init__(
        self,
        *,
        tokenizer: Tokenizer,
        template: jinja2.Template | None,
        specials: Mapping[str, str],
        parts: bool,
        warm: bool = True,
    ) -> None:
        """``warm``: encode the rest of a text a pick stopped short of in a worker thread."""
        self.tokenizer = tokenizer
        self.template = template
        """``None``: the model has no chat template, so chat requests get no ids."""
        self.specials = specials
        """``bos_token`` and the like, as the template sees them."""
        self.parts = parts
        """The template reads a message's content as a list of parts (else as one text)."""
        self._pieces: OrderedDict[bytes, list[int]] = OrderedDict()
        self._lock = threading.Lock()  # the pieces, between the event loop and the worker
        self._warm = warm
        self._warmer: ThreadPoolExecutor | None = None
        self._warming: set[Future[None]] = set()
        self._added = self._specials_added()
        self.pieces = self._agrees()
        """Pieces encode as the whole text does (else whole texts are encoded)."""

    @classmethod
    def load(cls, directory: Path, *, warm: bool = True) -> PromptTokenizer:
        """Read ``directory`` (blocking IO). Raises ``TokenizerError``."""
        path = directory / "tokenizer.json"
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises bare Exceptions
            raise TokenizerError(f"{path}: {exc}") from exc
        config_path = directory / "tokenizer_config.json"
        config: Mapping[str, Any] = {}
        if config_path.is_file():
            try:
                loaded = json.loads(config_path.read_text())
            except (OSError, ValueError) as exc:
                raise TokenizerError(f"{config_path}: {exc}") from exc
            config = loaded if isinstance(loaded, Mapping) else {}
        source = _template_source(directory, config)
        try:
            template = None if source is None else _compile(source)
        except jinja2.TemplateError as exc:
            raise TokenizerError(f"{directory}: the chat template does not compile: {exc}") from exc
        specials = {k: v for k in _SPECIALS if (v := _special(config.get(k))) is not None}
        parts = source is not None and _LOOPS_OVER_CONTENT.search(source) is not None
        return cls(
            tokenizer=tokenizer, template=template, specials=specials, parts=parts, warm=warm
        )

    def _specials_added(self) -> tuple[list[int], list[int]]:
        """The ids a completion's prompt gets before and after its own (BOS, EOS): what the
        tokenizer's post-processor adds with special tokens on."""
        plain = self.tokenizer.encode("a", add_special_tokens=False).ids
        full = self.tokenizer.encode("a", add_special_tokens=True).ids
        at = next((i for i in range(len(full)) if full[i : i + len(plain)] == plain), 0)
        return full[:at], full[at + len(plain) :]

    def _agrees(self) -> bool:
        whole = self._encode([_SAMPLE])[0]
        pieces: list[int] = []
        start = 0
        while start < len(_SAMPLE):
            end = _cuts(_SAMPLE, start=start, size=64)
            pieces += self._encode([_SAMPLE[start:end]])[0]
            start = end
        return pieces == whole

    def _encode(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    def _take(self, pending: list[tuple[bytes, str]]) -> list[int]:
        """Encode the ``pending`` pieces in one call, keep them, and give their ids."""
        if not pending:
            return []
        encoded = self._encode([t for _, t in pending])
        self._keep([key for key, _ in pending], encoded)
        pending.clear()
        return [i for ids in encoded for i in ids]

    def _keep(self, keys: list[bytes], encoded: list[list[int]]) -> None:
        with self._lock:
            for key, ids in zip(keys, encoded, strict=True):
                self._pieces[key] = ids
            while len(self._pieces) > _CACHED_PIECES:
                self._pieces.popitem(last=False)

    def _seen(self, key: bytes) -> list[int] | None:
        with self._lock:
            found = self._pieces.get(key)
            if found is not None:
                self._pieces.move_to_end(key)
            return found

    def _warm_rest(self, text: str, *, start: int, chain: hashlib.blake2b) -> None:
        """Encode, in the worker, up to ``WARM_CHARS`` of ``text`` from ``start`` (``chain``:
        the pieces' key hash up to there) that the cache does not hold."""
        if not self._warm or len(self._warming) >= _WARMING:
            return
        if self._warmer is None:
            self._warmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer-warm")
        future = self._warmer.submit(self._encode_rest, text, start, chain.copy())
        self._warming.add(future)
        future.add_done_callback(self._warming.discard)

    def _encode_rest(self, text: str, start: int, chain: hashlib.blake2b) -> None:
        try:
            keys: list[bytes] = []
            texts: list[str] = []
            for begin, end, key, _ in _walk(text, start=start, chain=chain):
                if begin >= start + WARM_CHARS:
                    break
                with self._lock:
                    seen = key in self._pieces
                if not seen:
                    keys.append(key)
                    texts.append(text[begin:end])
            # One piece a call: the library lets go of the GIL while it encodes, so the loop
            # runs on, and encodes one text on one core (a batch would take every core).
            for key, piece in zip(keys, texts, strict=True):
                self._keep([key], self._encode([piece]))
        except Exception:  # never lost silently, never the loop's
            log.exception("tokenizer warm-up failed")

    def settle(self) -> None:
        """Wait for the worker's warm-ups (tests, benchmarks)."""
        for future in list(self._warming):
            future.result()

    def encode(self, text: str, *, wanted: Wanted | None = None) -> TokenIds:
        """``text``'s ids (no special tokens added), from the cache of pieces and at most
        ``BUDGET_CHARS`` characters encoded now: all of them, or the first ones. With
        ``wanted``, a piece not seen yet is encoded only while ``wanted`` of the ids before it
        says they may still matter."""
        if not self.pieces:
            end = (
                len(text) if len(text) <= BUDGET_CHARS else _cuts(text, start=0, size=BUDGET_CHARS)
            )
            ids = self._encode([text[:end]])[0]
            return TokenIds(ids=ids, share=end / len(text) if text else 1.0)
        ids = []
        pending: list[tuple[bytes, str]] = []  # pieces not seen yet, encoded in one call
        chain = hashlib.blake2b(digest_size=16)
        start = spent = 0
        for begin, end, key, after in _walk(text, start=0, chain=chain):
            piece = text[begin:end]
            found = self._seen(key)
            if found is None:
                if spent + len(piece) > BUDGET_CHARS:
                    break
                if wanted is not None:  # asked before each piece: the ids so far, then decide
                    ids += self._take(pending)
                    if ids and not wanted(ids):
                        break
                pending.append((key, piece))
                spent += len(piece)
            else:
                ids += self._take(pending)
                ids += found
            chain, start = after, end  # taken: the key chain and the ids go on from here
        ids += self._take(pending)
        if start < len(text):  # the next request with this text (a next turn) may need it
            self._warm_rest(text, start=start, chain=chain)
        return TokenIds(ids=ids, share=1.0 if start >= len(text) else start / len(text))

    def token_ids(
        self, doc: Mapping[str, Any], /, *, wanted: Wanted | None = None
    ) -> TokenIds | None:
        """The prompt's token ids for a completion or chat request body (its first ones past
        the budget, or past where ``wanted`` says the rest cannot matter), ``None`` when they
        cannot be known (no prompt, no chat template, a template that refuses the request)."""
        prompt = doc.get("prompt")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "".join(prompt)
        if isinstance(prompt, str):
            head, tail = self._added
            ask = wanted if wanted is None or not head else _after(head, wanted)
            found = self.encode(prompt, wanted=ask)
            ids = [*head, *found.ids, *(tail if found.share == 1.0 else ())]
            return TokenIds(ids=ids, share=found.share)
        messages = doc.get("messages")
        if self.template is None or not isinstance(messages, list):
            return None
        if not self.parts:
            messages = [
                {**m, "content": _as_text(m.get("content"))} if isinstance(m, Mapping) else m
                for m in messages
            ]
        try:
            text = self.template.render(
                messages=messages,
                tools=doc.get("tools"),
                add_generation_prompt=True,
                **self.specials,
            )
        except (jinja2.TemplateError, TypeError, ValueError) as exc:
            log.debug("chat template refused a request", error=str(exc))
            return None
        return self.encode(text, wanted=wanted)


class TokenizerShelf:
    """Tokenizers by directory: ``get`` answers from what is loaded and starts loading what
    is not, in a worker thread (a model's ``tokenizer.json`` can take a second to parse), so
    the first requests of a new directory are picked without ids. A directory that fails is
    logged once per try and tried again after 30 s."""

    def __init__(
        self,
        *,
        load: Callable[[Path], PromptTokenizer] = PromptTokenizer.load,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._clock = clock
        self._loaded: dict[str, PromptTokenizer] = {}
        self._loading: set[str] = set()
        self._failed: dict[str, tuple[float, str]] = {}

    def get(self, directory: str) -> PromptTokenizer | None:
        """``directory``'s tokenizer when loaded, else ``None`` (and a load under way)."""
        found = self._loaded.get(directory)
        if found is not None or directory in self._loading:
            return found
        failed = self._failed.get(directory)
        if failed is not None and self._clock() - failed[0] < _RETRY_S:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a script, a test): load here
            self._finish(directory, self._try_load(directory))
            return self._loaded.get(directory)
        self._loading.add(directory)
        future = loop.run_in_executor(None, self._try_load, directory)
        future.add_done_callback(lambda f: self._finish(directory, f.result()))
        return None

    def failures(self) -> dict[str, str]:
        """Directory -> why it last failed to load, for those not loaded."""
        return {d: why for d, (_, why) in self._failed.items() if d not in self._loaded}

    def _try_load(self, directory: str) -> PromptTokenizer | str:
        try:
            return self._load(Path(directory))
        except TokenizerError as exc:
            return str(exc)
        except OSError as exc:  # a file there that cannot be read
            return f"{directory}: {exc}"

    def _finish(self, directory: str, result: PromptTokenizer | str) -> None:
        self._loading.discard(directory)
        if isinstance(result, str):
            self._failed[directory] = (self._clock(), result)
            log.error("tokenizer not loaded; picks use routing history", error=result)
            return
        self._failed.pop(directory, None)
        self._loaded[directory] = result
        log.info("tokenizer loaded", directory=directory)
