"""The list/watch protocol for one Service's EndpointSlices, on raw JSON.

List returns every slice and the collection's ``resourceVersion``, in pages of ``_PAGE_LIMIT``
(``limit`` and ``continue``, as kubectl and informers ask: the API server then serves one large
Service without building one huge answer; every page comes from the same snapshot, whose version
is the list's). A continue token the server no longer honours (410, after compaction) starts
the list over: the pages already read may be older than the rest. A watch from that version
streams newline-delimited events (``ADDED``, ``MODIFIED``, ``DELETED``, ``BOOKMARK``, ``ERROR``).
A version the server no longer keeps is answered ``410 Gone`` (as an HTTP status or as an
``ERROR`` event carrying a ``Status`` with code 410): the caller must list again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from xds_control.discovery.kubernetes_client import KubeApi
from xds_control.discovery.kubernetes_slices import SERVICE_NAME_LABEL
from xds_control.errors import DiscoveryError

__all__ = ["Gone", "Listing", "Pages", "WatchEvent", "list_slices", "watch_slices"]

log = structlog.get_logger(__name__)
_LIST_TIMEOUT_S = 30
_PAGE_LIMIT = 500
"""Slices per page: what kubectl (--chunk-size) and client-go's informers ask for."""
_LIST_STARTS = 3
"""Lists started over after an expired continue token before the caller is told ``Gone``."""
_MAX_LINE = 16 * 1024 * 1024
"""A slice holds at most 100 endpoints (a few tens of KiB); anything near this is garbage."""


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410 or an ERROR event with code 410)."""


@dataclass(frozen=True, slots=True)
class Listing:
    """A list's answer: slice name -> slice (JSON), and the version to watch from."""

    slices: dict[str, dict[str, Any]]
    resource_version: str


@dataclass(slots=True)
class Pages:
    """The pages of one list as they come: ``add`` each answer, until it says there is no
    next one. The version is the first page's (every page carries the same snapshot's)."""

    slices: dict[str, dict[str, Any]] = field(default_factory=dict)
    resource_version: str | None = None

    def add(self, data: Mapping[str, Any]) -> str | None:
        """Take one ``EndpointSliceList`` page; the continue token for the next page, or
        ``None`` when this was the last. ``ValueError`` for a malformed page."""
        try:
            metadata = data["metadata"]
            version = str(metadata["resourceVersion"])
            items = data.get("items") or []
            self.slices.update((str(item["metadata"]["name"]), item) for item in items)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError("malformed EndpointSliceList") from exc
        if self.resource_version is None:
            self.resource_version = version
        token = metadata.get("continue")
        return str(token) if token else None

    def listing(self) -> Listing:
        """The whole list, once the last page is in."""
        if self.resource_version is None:
            raise ValueError("no page listed")
        return Listing(slices=self.slices, resource_version=self.resource_version)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ``object`` is the slice (or, for BOOKMARK, just its metadata)."""

    type: str
    object: dict[str, Any]

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


async def list_slices(api: KubeApi, *, namespace: str, service: str) -> Listing:
    """Every EndpointSlice of ``namespace/service``, page by page. Raises ``Gone`` (the list
    kept expiring), ``DiscoveryError`` (an API error) or aiohttp's errors (connection)."""
    what = f"list {namespace}/{service}"
    for start in range(_LIST_STARTS):
        pages = Pages()
        token: str | None = None
        try:
            while True:
                body = await _page(api, namespace=namespace, service=service, token=token)
                try:
                    token = pages.add(json.loads(body))
                except ValueError as exc:
                    raise DiscoveryError(f"{what}: malformed EndpointSliceList") from exc
                if token is None:
                    return pages.listing()
        except Gone:
            if token is None:
                raise
            log.info("continue token expired; listing from the start", list=what, start=start)
    raise Gone(f"{what}: continue token expired {_LIST_STARTS} times")


async def _page(api: KubeApi, *, namespace: str, service: str, token: str | None) -> bytes:
    resp = await api.list_namespaced_endpoint_slice(
        namespace,
        label_selector=f"{SERVICE_NAME_LABEL}={service}",
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
        raise _status_error(resp.status, body, what=f"list {namespace}/{service}")
    return body


async def watch_slices(
    api: KubeApi, *, namespace: str, service: str, resource_version: str, timeout_s: int
) -> AsyncIterator[WatchEvent]:
    """Events after ``resource_version``, with bookmarks, until the server ends the watch
    (after ``timeout_s``): a clean end returns, a broken stream raises aiohttp's error, an
    expired version raises ``Gone``, any other ``ERROR`` event ``DiscoveryError``."""
    what = f"watch {namespace}/{service}"
    resp = await api.list_namespaced_endpoint_slice(
        namespace,
        label_selector=f"{SERVICE_NAME_LABEL}={service}",
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
