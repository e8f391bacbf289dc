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

import functools
import re
from collections.abc import Callable
from typing import Any

import structlog

from xds_control.config.inference_pools import InferencePoolsDiscovery
from xds_control.config.model import NAME_PATTERN
from xds_control.discovery.kubernetes.client import custom_objects_api
from xds_control.discovery.kubernetes.inference_pool import InferencePoolError, pool_spec
from xds_control.discovery.kubernetes.inference_pool_source import GROUP, PLURAL, VERSION
from xds_control.discovery.kubernetes.list_watch import Listing, Request, WatchEvent
from xds_control.discovery.kubernetes.watched import WatchedSource
from xds_control.errors import DiscoveryError

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


class InferencePoolCatalog(WatchedSource[InferencePoolsDiscovery, tuple[str, ...]]):
    """The InferencePools of ``settings.namespace``; ``wake`` is called (on the event loop)
    when the set of usable ones changes. The watch starts on the first ``fetch`` and ends with
    ``close`` (``WatchedSource``); ``fetch`` answers the usable ones' names, sorted."""

    _FAILED_EVENT = "InferencePool watch failed; listing again"

    def __init__(self, settings: InferencePoolsDiscovery, *, wake: Callable[[], None]) -> None:
        bound = log.bind(namespace=settings.namespace)
        super().__init__(settings, wake=wake, log=bound, task="inferencepools")
        self._names: tuple[str, ...] = ()
        self._listed = False
        self._rejected: dict[str, str] = {}
        """Name -> why it is left out, as last logged."""
        self._objects: dict[str, dict[str, Any]] = {}

    def _answer(self) -> tuple[str, ...]:
        if not self._listed:
            raise DiscoveryError(f"InferencePools of {self._settings.namespace}: not listed yet")
        return self._names

    async def _run(self) -> None:
        await self._follow(
            key="list",
            what=f"inferencepools {self._settings.namespace}",
            request=self._request,
            on_list=self._take_listing,
            on_event=self._apply,
        )

    def _describe(self, exc: Exception, *, what: str) -> str:
        message = str(exc) if isinstance(exc, DiscoveryError) else f"{exc!r}"
        return f"InferencePools of {self._settings.namespace}: {message}"

    async def _take_listing(self, listing: Listing) -> None:
        self._objects = dict(listing.items)
        self._listed = True
        self._first.set()
        self._publish()

    async def _apply(self, event: WatchEvent) -> None:
        name = event.name
        if event.type == "DELETED":
            self._objects.pop(name, None)
        elif event.type in ("ADDED", "MODIFIED"):
            self._objects[name] = event.object
        self._publish()

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
