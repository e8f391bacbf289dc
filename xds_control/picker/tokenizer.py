"""A request's prompt as the serving engine cuts it into token ids, from the model's own
tokenizer files.

vLLM and SGLang turn a chat request into text with the model's chat template (Jinja) and
encode that text without adding special tokens (the template writes them itself); a
completion's ``prompt`` is encoded with them. The picker does the same, from a copy of the
model repository's ``tokenizer.json`` and its chat template (``chat_template.jinja``, else
``tokenizer_config.json``'s ``chat_template``) that the operator mounts: nothing is downloaded.
The ids then key the prompt's blocks the way the engine's KV events key what it holds
(``picker/held.py``), and count its tokens exactly.

How vLLM hands message contents to a template: a template that loops over a message's
``content`` gets OpenAI's list of parts; any other gets the text parts joined by newlines
(vLLM's "auto" content format).

``PromptTokenizer`` is pure once loaded; ``TokenizerShelf`` loads each directory once, off the
event loop, and retries one that failed.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import structlog
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

__all__ = ["PromptTokenizer", "TokenizerError", "TokenizerShelf"]

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


@dataclass(frozen=True, slots=True)
class PromptTokenizer:
    """One model's tokenizer and chat template."""

    tokenizer: Tokenizer
    template: jinja2.Template | None
    """``None``: the model has no chat template, so chat requests get no ids."""
    specials: Mapping[str, str]
    """``bos_token`` and the like, as the template sees them."""
    parts: bool
    """The template reads a message's content as a list of parts (else as one text)."""

    @classmethod
    def load(cls, directory: Path) -> PromptTokenizer:
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
        return cls(tokenizer=tokenizer, template=template, specials=specials, parts=parts)

    def token_ids(self, doc: Mapping[str, Any]) -> list[int] | None:
        """The prompt's token ids for a completion or chat request body, ``None`` when they
        cannot be known (no prompt, no chat template, a template that refuses the request)."""
        prompt = doc.get("prompt")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "".join(prompt)
        if isinstance(prompt, str):
            return list(self.tokenizer.encode(prompt, add_special_tokens=True).ids)
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
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)


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
