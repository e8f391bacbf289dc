"""Which InferencePools exist in a namespace, kept current by one list and watch of them all:
what ``inference_pools`` turns into pools at run time.

Only the names are this source's answer; each pool's endpoints, selector and picker are then
followed by that pool's own ``InferencePoolSource``, as for a pool of the config. An object is
a pool once it is usable: a name that cannot be a pool's (an Envoy cluster's) or a spec
without a selector or target port is left out with one log line naming the field, and nothing
else changes. A pool that was usable stays while a bad edit is in place: its own source keeps
its last good spec and says so, so the object's name is logged once, by whoever serves it.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from typing import Any

import structlog

from xds_control.config.inference_pools import InferencePoolsDiscovery
from xds_control.config.model import NAME_PATTERN
from xds_control.discovery.inference_pool import GROUP, PLURAL, VERSION
from xds_control.discovery.kubernetes_client import KubeApi, connect, custom_objects_api
from xds_control.discovery.kubernetes_inference_pool import InferencePoolError, pool_spec
from xds_control.discovery.kubernetes_watch import Listing, Request, WatchEvent, follow
from xds_control.errors import DiscoveryError
from xds_control.tasks import guarded_task, wait_set

__all__ = ["InferencePoolCatalog", "usable_problem"]

log = structlog.get_logger(__name__)
_NAME = re.compile(NAME_PATTERN)


def usable_problem(name: str, item: dict[str, Any]) -> str | None:
    """Why the InferencePool ``name`` cannot be a pool, naming the field; ``None`` if it can."""
    if not _NAME.match(name):
        return (
            f"metadata.name {name!r} cannot name a pool (at most 63 lower-case letters, "
            "digits, '.', '_' and '-')"
        )
    try:
        pool_spec(item)
    except InferencePoolError as exc:
        return f"spec: {exc}"
    return None


class InferencePoolCatalog:
    """The InferencePools of ``settings.namespace``; ``wake`` is called (on the event loop)
    when the set of usable ones changes. The watch starts on the first ``fetch`` and ends with
    ``close``."""

    def __init__(self, settings: InferencePoolsDiscovery, *, wake: Callable[[], None]) -> None:
        self._settings = settings
        self._wake = wake
        self._log = log.bind(namespace=settings.namespace)
        self._names: tuple[str, ...] = ()
        self._listed = False
        self._rejected: dict[str, str] = {}
        """Name -> why it is left out, as last logged."""
        self._error: str | None = None
        self._first = asyncio.Event()
        self._waited = False
        self._task: asyncio.Task[None] | None = None
        self._api: KubeApi | None = None
        self._objects: dict[str, dict[str, Any]] = {}

    @property
    def settings(self) -> InferencePoolsDiscovery:
        """What it was built from: a reload with the same settings keeps this catalog."""
        return self._settings

    async def fetch(self) -> tuple[str, ...]:
        """The usable InferencePools' names, sorted. The first call starts the watch and waits
        up to ``first_list_timeout_s`` for the first list. ``DiscoveryError`` while nothing was
        listed yet or the API cannot be reached (the caller keeps the last names)."""
        if self._task is None:
            self._task = guarded_task(self._run(), name="inferencepools")
        if not self._waited:
            self._waited = True
            await wait_set(self._first, timeout=self._settings.first_list_timeout_s)
        if self._error is not None:
            raise DiscoveryError(self._error)
        if not self._listed:
            raise DiscoveryError(f"InferencePools of {self._settings.namespace}: not listed yet")
        return self._names

    async def close(self) -> None:
        """Stop watching and close the connection."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._api is not None:
            await self._api.api_client.close()
            self._api = None

    async def _run(self) -> None:
        settings = self._settings

        async def listed(listing: Listing) -> None:
            self._error = None
            self._objects = dict(listing.items)
            self._listed = True
            self._first.set()
            self._publish()

        async def event(each: WatchEvent) -> None:
            name = str((each.object.get("metadata") or {}).get("name", ""))
            if each.type == "DELETED":
                self._objects.pop(name, None)
            elif each.type in ("ADDED", "MODIFIED"):
                self._objects[name] = each.object
            self._publish()

        def failed(exc: Exception) -> None:
            message = str(exc) if isinstance(exc, DiscoveryError) else f"{exc!r}"
            message = f"InferencePools of {settings.namespace}: {message}"
            if message != self._error:
                self._log.error("InferencePool watch failed; listing again", error=message)
            self._error = message
            self._first.set()
            self._wake()

        await follow(
            what=f"inferencepools {settings.namespace}",
            connect=self._connect,
            request=self._request,
            on_list=listed,
            on_event=event,
            on_failure=failed,
            watch_timeout_s=settings.watch_timeout_s,
            relist_backoff_s=settings.relist_backoff_s,
            log=self._log,
        )

    async def _connect(self) -> None:
        if self._api is None:
            self._api = await connect(self._settings)

    def _request(self) -> Request:
        return functools.partial(
            custom_objects_api(self._api).list_namespaced_custom_object,
            GROUP,
            VERSION,
            self._settings.namespace,
            PLURAL,
        )

    def _publish(self) -> None:
        names: list[str] = []
        rejected: dict[str, str] = {}
        for name in sorted(self._objects):
            problem = usable_problem(name, self._objects[name])
            if problem is None or name in self._names:
                names.append(name)  # a served pool's bad edit: its own source keeps the last
            else:
                rejected[name] = problem
        for name, problem in rejected.items():
            if self._rejected.get(name) != problem:
                self._log.error("InferencePool left out", inference_pool=name, error=problem)
        self._rejected = rejected
        if tuple(names) != self._names:
            added = sorted(set(names) - set(self._names))
            removed = sorted(set(self._names) - set(names))
            self._log.info("InferencePools changed", added=added, removed=removed)
            self._names = tuple(names)
            self._wake()
