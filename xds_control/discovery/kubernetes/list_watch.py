"""The list/watch protocol for one selection of Kubernetes objects, on raw JSON: one Service's
EndpointSlices, the pods an InferencePool selects, the InferencePool itself.

A ``Request`` is the client's list call with the selection bound (namespace, label or field
selector); this module adds the query of a list page or of a watch. List returns every object
and the collection's ``resourceVersion``, in pages of ``_PAGE_LIMIT`` (``limit`` and
``continue``, as kubectl and informers ask: the API server then serves one large selection
without building one huge answer; every page comes from the same snapshot, whose version is the
list's). A continue token the server no longer honours (410, after compaction) starts
the list over: the pages already read may be older than the rest. A watch from that version
streams newline-delimited events (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``, ``ERROR``).
A version the server no longer keeps is answered ``410 Gone`` (as an HTTP status or as an
``ERROR`` event carrying a ``Status`` with code 410): the caller must list again.
``follow`` is that caller for every source: list, watch from the list's version and renew the
watch until it fails, list again at once after a 410 and after a doubling backoff otherwise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from xds_control.errors import DiscoveryError

__all__ = [
    "Gone",
    "Listing",
    "Pages",
    "Request",
    "WatchEvent",
    "follow",
    "list_objects",
    "watch_objects",
]

log = structlog.get_logger(__name__)
_LIST_TIMEOUT_S = 30
_PAGE_LIMIT = 500
"""Objects per page: what kubectl (--chunk-size) and client-go's informers ask for."""
_LIST_STARTS = 3
"""Lists started over after an expired continue token before the caller is told ``Gone``."""
_MAX_LINE = 16 * 1024 * 1024
"""A slice holds at most 100 endpoints, a pod a few KiB; anything near this is garbage."""

Request = Callable[..., Awaitable[Any]]
"""A ``kubernetes_asyncio`` list call (``list_namespaced_endpoint_slice``, ``list_namespaced_pod``,
``list_namespaced_custom_object``) with its selection bound: it takes the list and watch query
(``limit``, ``_continue``, ``watch``, ``resource_version``, ...) and ``_preload_content=False``."""


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410 or an ERROR event with code 410)."""


@dataclass(frozen=True, slots=True)
class Listing:
    """A list's answer: object name -> object (JSON), and the version to watch from."""

    items: dict[str, dict[str, Any]]
    resource_version: str


@dataclass(slots=True)
class Pages:
    """The pages of one list as they come: ``add`` each answer, until it says there is no
    next one. The version is the first page's (every page carries the same snapshot's)."""

    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    resource_version: str | None = None

    def add(self, data: Mapping[str, Any]) -> str | None:
        """Take one list page (``EndpointSliceList``, ``PodList``, ...); the continue token for
        the next page, or ``None`` when this was the last. ``ValueError`` for a malformed page."""
        try:
            metadata = data["metadata"]
            version = str(metadata["resourceVersion"])
            items = data.get("items") or []
            self.items.update((str(item["metadata"]["name"]), item) for item in items)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("malformed list") from exc
        if self.resource_version is None:
            self.resource_version = version
        token = metadata.get("continue")
        return str(token) if token else None

    def listing(self) -> Listing:
        """The whole list, once the last page is in."""
        if self.resource_version is None:
            raise ValueError("no page listed")
        return Listing(items=self.items, resource_version=self.resource_version)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ``object`` is the object (or, for BOOKMARK, just its metadata)."""

    type: str
    object: dict[str, Any]

    @property
    def name(self) -> str:
        """The object's ``metadata.name`` ("" when it has none)."""
        return str((self.object.get("metadata") or {}).get("name", ""))

    @property
    def resource_version(self) -> str | None:
        """The version this event brings the watch to."""
        version = (self.object.get("metadata") or {}).get("resourceVersion")
        return str(version) if version else None


def _status_error(status: int, body: bytes, *, what: str) -> Exception:
    if status == 410:
        return Gone(f"{what}: 410 Gone")
    try:
        message = json.loads(body).get("message", "")
    except (ValueError, AttributeError):
        message = body[:200].decode("utf-8", "replace")
    return DiscoveryError(f"{what}: HTTP {status}: {message}".rstrip(": "))


async def list_objects(request: Request, *, what: str) -> Listing:
    """Every object ``request`` selects, page by page; ``what`` names the selection in errors.
    Raises ``Gone`` (the list kept expiring), ``DiscoveryError`` (an API error) or aiohttp's
    errors (connection)."""
    what = f"list {what}"
    for start in range(_LIST_STARTS):
        pages = Pages()
        token: str | None = None
        try:
            while True:
                body = await _page(request, token=token, what=what)
                try:
                    token = pages.add(json.loads(body))
                except ValueError as exc:
                    raise DiscoveryError(f"{what}: malformed list") from exc
                if token is None:
                    return pages.listing()
        except Gone:
            if token is None:
                raise
            log.info("continue token expired; listing from the start", list=what, start=start)
    raise Gone(f"{what}: continue token expired {_LIST_STARTS} times")


async def _page(request: Request, *, token: str | None, what: str) -> bytes:
    resp = await request(
        limit=_PAGE_LIMIT,
        _continue=token,
        _preload_content=False,
        _request_timeout=_LIST_TIMEOUT_S,
    )
    try:
        body: bytes = await resp.read()
    finally:
        resp.release()
    if resp.status != 200:
        raise _status_error(resp.status, body, what=what)
    return body


async def watch_objects(
    request: Request, *, what: str, resource_version: str, timeout_s: int
) -> AsyncIterator[WatchEvent]:
    """Events after ``resource_version``, with bookmarks, until the server ends the watch
    (after ``timeout_s``): a clean end returns, a broken stream raises aiohttp's error, an
    expired version raises ``Gone``, any other ``ERROR`` event ``DiscoveryError``."""
    what = f"watch {what}"
    resp = await request(
        watch=True,
        allow_watch_bookmarks=True,
        resource_version=resource_version,
        timeout_seconds=timeout_s,
        _preload_content=False,
        _request_timeout=timeout_s + 30,
    )
    try:
        if resp.status != 200:
            raise _status_error(resp.status, await resp.read(), what=what)
        async for line in _lines(resp.content):
            yield _event(line, what=what)
    finally:
        resp.close()


async def _lines(content: Any) -> AsyncIterator[bytes]:
    """Newline-delimited lines of a chunked body, whatever the chunk boundaries."""
    buffer = b""
    async for chunk in content.iter_any():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
        if len(buffer) > _MAX_LINE:
            raise DiscoveryError(f"watch event longer than {_MAX_LINE} bytes")
    if buffer.strip():
        yield buffer


def _event(line: bytes, *, what: str) -> WatchEvent:
    try:
        data = json.loads(line)
        kind, obj = str(data["type"]), data["object"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DiscoveryError(f"{what}: malformed watch event: {line[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise DiscoveryError(f"{what}: malformed watch event: {line[:200]!r}")
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise Gone(f"{what}: {obj.get('message', '410 Gone')}")
        raise DiscoveryError(f"{what}: {obj.get('code')} {obj.get('message', '')}".rstrip())
    return WatchEvent(type=kind, object=obj)


MAX_BACKOFF_S = 30.0
"""The longest wait before listing again while lists keep failing."""


async def follow(
    *,
    what: str,
    connect: Callable[[], Awaitable[None]],
    request: Callable[[], Request],
    on_list: Callable[[Listing], Awaitable[None]],
    on_event: Callable[[WatchEvent], Awaitable[None]],
    on_failure: Callable[[Exception], None],
    watch_timeout_s: int,
    relist_backoff_s: float,
    log: Any,
    after_watch: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Keep a selection current, forever: ``connect`` (a no-op once connected), list with
    ``request`` and hand the listing to ``on_list``, then watch from its version, each event
    but bookmarks to ``on_event``, renewing the watch when the server ends it (``after_watch``
    runs after each). An expired version lists again at once; any other failure goes to
    ``on_failure`` and lists again after ``relist_backoff_s``, doubling up to
    ``MAX_BACKOFF_S`` while it keeps failing. Nothing the server sends stops it."""
    backoff = relist_backoff_s
    while True:
        try:
            await connect()
            listing = await list_objects(request(), what=what)
            await on_list(listing)
            backoff = relist_backoff_s
            version = listing.resource_version
            while True:  # renew the watch from the last version until it fails
                events = watch_objects(
                    request(), what=what, resource_version=version, timeout_s=watch_timeout_s
                )
                async for event in events:
                    if event.type != "BOOKMARK":
                        await on_event(event)
                    version = event.resource_version or version
                if after_watch is not None:
                    await after_watch()
        except Gone as exc:
            log.info("resourceVersion expired; listing again", list=what, reason=str(exc))
        except Exception as exc:  # whatever the server sends, list again; never stop
            on_failure(exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
