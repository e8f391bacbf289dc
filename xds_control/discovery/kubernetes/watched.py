"""The shell every Kubernetes source shares around its list/watch loops (``list_watch.follow``).

A ``WatchedSource`` answers ``fetch`` from what its watches last listed and saw. The contract,
the same for the EndpointSlice source, the InferencePool source and the InferencePool catalog:

- the first ``fetch`` starts the watch task (``_run``) and waits up to
  ``first_list_timeout_s`` for the first answer (``_answered``: a list, or for sources that
  say so, a failure), once; later calls never wait;
- ``fetch`` raises ``DiscoveryError`` while any watch's last attempt failed (every failure
  recorded under its key by ``_follow``, cleared by that watch's next list, joined in key
  order), then whatever ``_answer`` raises while nothing usable was listed yet; otherwise it
  returns ``_answer()``, the current set;
- ``close`` cancels the watch tasks (``_watch_tasks``) and closes the API connection, which
  ``_connect`` opened on the first list (``kubernetes_asyncio`` is imported only then, so the
  product runs without the optional extra).

A failure logs ``_FAILED_EVENT`` once per new message and wakes the loop, which shows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, ClassVar, Generic, TypeVar

from xds_control.config.discovery import KubeConnection
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.kubernetes.client import KubeApi, connect
from xds_control.discovery.kubernetes.list_watch import Listing, Request, WatchEvent, follow
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task, wait_set

__all__ = ["WatchedSource"]

SettingsT = TypeVar("SettingsT", bound=KubeConnection)
AnswerT = TypeVar("AnswerT")


class WatchedSource(Generic[SettingsT, AnswerT]):
    """What ``settings`` selects, kept current by list and watch; ``wake`` is called (on the
    event loop) whenever the answer or an error changes. Subclasses give ``_run`` (their
    watches, each through ``_follow``) and ``_answer``; the module docstring has the contract."""

    _FAILED_EVENT: ClassVar[str] = "watch failed; listing again"
    """The log event of a failed list or watch."""
    _ANSWERED_BY_FAILURE: ClassVar[bool] = True
    """Whether a failure ends the first ``fetch``'s wait (else only a list does, or the
    timeout)."""

    def __init__(
        self, settings: SettingsT, *, wake: Callable[[], None], log: Any, task: str
    ) -> None:
        self._settings = settings
        self._wake = wake
        self._log = log
        self._task_name = task
        self._errors: dict[str, str] = {}
        self._first = asyncio.Event()
        self._waited = False
        self._task: asyncio.Task[None] | None = None
        self._api: KubeApi | None = None

    @property
    def settings(self) -> SettingsT:
        """What it was built from: a reload with the same settings keeps this source."""
        return self._settings

    async def fetch(self) -> AnswerT:
        """The answer as last listed and watched; see the module docstring for the first call's
        wait and the ``DiscoveryError`` cases (the caller then keeps its last good answer)."""
        if self._task is None:
            self._task = guarded_task(self._run(), name=self._task_name)
        if not self._waited:
            self._waited = True
            await wait_set(self._first, timeout=self._settings.first_list_timeout_s)
        if self._errors:
            raise DiscoveryError("; ".join(self._errors[key] for key in sorted(self._errors)))
        return self._answer()

    async def close(self) -> None:
        """Stop watching and close the connection."""
        for task in self._watch_tasks():
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._api is not None:
            await self._api.api_client.close()
            self._api = None

    def _run(self) -> Coroutine[Any, Any, None]:
        """The watch task: one or more ``_follow`` calls."""
        raise NotImplementedError

    def _answer(self) -> AnswerT:
        """The current answer, or ``DiscoveryError`` while nothing usable was listed yet."""
        raise NotImplementedError

    def _watch_tasks(self) -> tuple[asyncio.Task[None] | None, ...]:
        """The tasks ``close`` ends, in order; a source with a second watch adds its own."""
        return (self._task,)

    def _describe(self, exc: Exception, *, what: str) -> str:
        """A failure's message as ``fetch`` raises it."""
        return str(exc) if isinstance(exc, DiscoveryError) else f"{what}: {exc!r}"

    async def _follow(
        self,
        *,
        key: str,
        what: str,
        request: Callable[[], Request],
        on_list: Callable[[Listing], Awaitable[None]],
        on_event: Callable[[WatchEvent], Awaitable[None]],
        after_watch: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``list_watch.follow`` for one watch, over this source's connection and settings;
        its failures are recorded under ``key`` until its next list."""

        async def listed(listing: Listing) -> None:
            await on_list(listing)
            self._errors.pop(key, None)

        def failed(exc: Exception) -> None:
            self._fail(key, self._describe(exc, what=what))

        settings = self._settings
        await follow(
            what=what,
            connect=self._connect,
            request=request,
            on_list=listed,
            on_event=on_event,
            on_failure=failed,
            watch_timeout_s=settings.watch_timeout_s,
            relist_backoff_s=settings.relist_backoff_s,
            log=self._log,
            after_watch=after_watch,
        )

    async def _connect(self) -> None:
        if self._api is None:
            self._api = await connect(self._settings)

    def _log_listed(
        self,
        event: str,
        listing: Listing,
        *,
        before: Iterable[Endpoint],
        after: Iterable[Endpoint],
        **counts: int,
    ) -> None:
        """Log a list's answer: its version, ``counts`` and the endpoints it added and removed."""
        was, now = {e.address for e in before}, {e.address for e in after}
        self._log.info(
            event,
            resource_version=listing.resource_version,
            **counts,
            endpoints=len(now),
            added=sorted(now - was),
            removed=sorted(was - now),
        )

    def _fail(self, key: str, message: str, *, event: str | None = None) -> None:
        if self._errors.get(key) != message:
            self._log.error(event or self._FAILED_EVENT, error=message)
        self._errors[key] = message
        if self._ANSWERED_BY_FAILURE:
            self._first.set()
        self._wake()  # the loop shows the error
