"""The OpenAI completion routes of one simulated server: parse the request, queue it on the
scheduler, answer as JSON or as server-sent events as the tokens come out.

Failures look like a real engine's: an injected error is a 500, a full queue the profile's
status, a request longer than the context a 400, and a restart mid-request a 503. A body that
is not a completion request is a 400 too, unless the profile is ``lenient_body`` (then its text
is the prompt).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time

from aiohttp import web

from xds_lab.sim.faults import FaultState
from xds_lab.sim.openai_api import (
    completion_body,
    error_body,
    filler_text,
    lenient_request,
    parse_request,
    stream_chunk,
)
from xds_lab.sim.profiles import Profile
from xds_lab.sim.scheduler import (
    QueueFullError,
    RequestTooLongError,
    Scheduler,
    SeqState,
    ServerRestartedError,
)
from xds_lab.sim.stats import EngineStats
from xds_lab.sim.tokenizer import encode
from xds_lab.sim.tokens import block_hashes

__all__ = ["JSON_ERRORS", "Completions"]

JSON_ERRORS = (ValueError, UnicodeDecodeError)
"""What a malformed request body raises while it is read and parsed."""


class Completions:
    """The completion handlers of server ``name``; they share its scheduler, statistics,
    faults and random source."""

    def __init__(
        self,
        *,
        name: str,
        profile: Profile,
        scheduler: Scheduler,
        stats: EngineStats,
        faults: FaultState,
        rng: random.Random,
    ) -> None:
        self.name = name
        self.profile = profile
        self.scheduler = scheduler
        self.stats = stats
        self.faults = faults
        self._rng = rng
        self._ids = itertools.count()

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``."""
        return await self._serve(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._serve(request, chat=True)

    async def tokenize(self, request: web.Request) -> web.Response:
        """``POST /tokenize``, as vLLM answers it: a ``prompt`` or chat ``messages`` as the
        lab's tokenizer cuts them (``xds_lab.sim.tokenizer``)."""
        try:
            body = json.loads(await request.read())
            chat = isinstance(body, dict) and "messages" in body
            parsed = parse_request(body, chat=chat, default_model=self.profile.model)
        except JSON_ERRORS as exc:
            return self._error(400, str(exc), "BadRequestError")
        ids = encode(parsed.tokens)
        return web.json_response(
            {
                "count": len(ids),
                "max_model_len": self.profile.max_model_len,
                "tokens": ids,
                "token_strs": None,
            }
        )

    def _error(self, status: int, message: str, kind: str) -> web.Response:
        return web.json_response(error_body(message=message, kind=kind, code=status), status=status)

    async def _serve(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        await self.faults.running.wait()
        if self.faults.error_rate and self._rng.random() < self.faults.error_rate:
            self.stats.requests_failed += 1
            return self._error(500, "injected fault", "InternalServerError")
        raw = await request.read()
        try:
            parsed = parse_request(json.loads(raw), chat=chat, default_model=self.profile.model)
        except JSON_ERRORS as exc:
            if not self.profile.lenient_body:
                return self._error(400, str(exc), "BadRequestError")
            parsed = lenient_request(raw, default_model=self.profile.model)
        loop = asyncio.get_running_loop()
        seq = SeqState(
            prompt_tokens=len(parsed.tokens),
            max_tokens=parsed.max_tokens,
            block_hashes=block_hashes(parsed.tokens),
            arrival=loop.time(),
            first_token=loop.create_future(),
            done=loop.create_future(),
            token_ids=encode(parsed.tokens) if self.scheduler.kv_events else [],
            # With LoRA on, a model other than the base names an adapter (vLLM's --lora-modules).
            adapter=parsed.model
            if self.profile.max_loras and parsed.model != self.profile.model
            else None,
        )
        try:
            self.scheduler.submit(seq)
        except QueueFullError as exc:
            return self._error(self.profile.full_queue_status, str(exc), "ServiceUnavailableError")
        except RequestTooLongError as exc:
            return self._error(400, str(exc), "BadRequestError")
        request_id = f"cmpl-{self.name}-{next(self._ids)}"
        try:
            if parsed.stream:
                return await self._stream(
                    request,
                    seq,
                    chat=chat,
                    request_id=request_id,
                    model=parsed.model,
                    include_usage=parsed.include_usage,
                )
            await seq.done
        except ServerRestartedError as exc:
            return self._error(503, str(exc), "ServiceUnavailableError")
        finally:
            # A client that went away (handler cancelled) must not keep its KV blocks.
            self.scheduler.abort(seq)
        body = completion_body(
            request_id=request_id,
            server=self.name,
            model=parsed.model,
            chat=chat,
            text=filler_text(0, seq.max_tokens),
            prompt_tokens=seq.prompt_tokens,
            completion_tokens=seq.max_tokens,
            cached_tokens=seq.cached_tokens,
            created=int(time.time()),
        )
        return web.json_response(body)

    async def _stream(
        self,
        request: web.Request,
        seq: SeqState,
        *,
        chat: bool,
        request_id: str,
        model: str,
        include_usage: bool,
    ) -> web.StreamResponse:
        await seq.first_token
        response = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        try:
            await response.prepare(request)
            created = int(time.time())
            sent = 0
            while True:
                produced = self.scheduler.generated(seq)
                if produced > sent:
                    text = filler_text(sent, produced - sent)
                    await response.write(
                        stream_chunk(
                            request_id=request_id,
                            server=self.name,
                            model=model,
                            chat=chat,
                            text=text,
                            created=created,
                        )
                    )
                    sent = produced
                if seq.done.done():
                    break
                await self.scheduler.next_step()
            if seq.done.exception() is not None:
                return response  # restarted mid-stream: the restart already reset the connection
            if include_usage:
                usage = (seq.prompt_tokens, seq.max_tokens, seq.cached_tokens)
                await response.write(
                    stream_chunk(
                        request_id=request_id,
                        server=self.name,
                        model=model,
                        chat=chat,
                        text=None,
                        created=created,
                        usage=usage,
                    )
                )
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionResetError:
            # The client (or Envoy on its behalf) went away mid-stream, as users do;
            # ``_serve`` frees the request's KV blocks.
            pass
        return response
