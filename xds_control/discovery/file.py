"""Endpoints kept in a YAML file beside the config, re-read when it changes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from xds_control.config import EndpointConfig
from xds_control.config.address import canonical_address
from xds_control.config.document import parse_yaml, read_bytes
from xds_control.config.duplicates import duplicates
from xds_control.config.load import validation_problems
from xds_control.discovery.endpoint import Endpoint
from xds_control.discovery.entries import EntryCache
from xds_control.discovery.static import to_endpoints
from xds_control.errors import ConfigError, DiscoveryError

__all__ = ["FileSource", "FileStamp", "file_stamp", "parse_endpoints_file"]

FileStamp = tuple[int, int, int]


def file_stamp(path: Path) -> FileStamp:
    """What changes when a file is edited: mtime, size and inode (a Kubernetes ConfigMap update
    swaps a symlink, which changes the inode). Blocking; raises ``OSError``."""
    stat = os.stat(path)
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


class _EndpointsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoints: tuple[EndpointConfig, ...]


def parse_endpoints_file(*, text: str | bytes, source: str) -> tuple[Endpoint, ...]:
    """Validate an endpoints file's text (bytes must be UTF-8); raise ``DiscoveryError`` naming
    the field, and nothing else whatever the bytes."""
    try:
        data: Any = parse_yaml(text, source=source)
        parsed = _EndpointsFile.model_validate(data if data is not None else {})
    except ConfigError as exc:
        raise DiscoveryError(str(exc)) from exc
    except ValidationError as exc:
        detail = "; ".join(f"{path}: {msg}" for path, msg in validation_problems(exc))
        raise DiscoveryError(f"{source}: {detail}") from exc
    return to_endpoints(parsed.endpoints)


class FileSource:
    """Endpoints from ``path``, re-read only when its ``file_stamp`` changes; an edit parses
    and validates only the entries whose text changed (``EntryCache``)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stamp: FileStamp | None = None
        self._endpoints: tuple[Endpoint, ...] = ()
        self._entries = EntryCache()

    async def fetch(self) -> tuple[Endpoint, ...]:
        """The file's endpoints; ``DiscoveryError`` when it is missing or invalid."""
        # Off the loop, in one hop to a thread: a whole parse of 1,000 endpoints takes ~30 ms
        # of CPU, in which the ADS streams would not be served.
        return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> tuple[Endpoint, ...]:
        try:
            stamp = file_stamp(self._path)
        except OSError as exc:
            raise DiscoveryError(f"{self._path}: cannot read: {exc.strerror}") from exc
        if stamp != self._stamp:
            self._endpoints = self._load()
            self._stamp = stamp
        return self._endpoints

    def _load(self) -> tuple[Endpoint, ...]:
        endpoints = self._parse()
        repeats = duplicates(
            (
                (f"endpoints[{k}].address", canonical_address(e.address))
                for k, e in enumerate(endpoints)
            ),
            what="address",
        )
        if repeats:
            detail = "; ".join(f"{path}: {message}" for path, message in repeats)
            raise DiscoveryError(f"{self._path}: {detail}")
        return endpoints

    def _parse(self) -> tuple[Endpoint, ...]:
        try:
            data = read_bytes(self._path)
        except ConfigError as exc:
            raise DiscoveryError(str(exc)) from exc
        try:
            fast = self._entries.parse(data.decode("utf-8"))
        except UnicodeDecodeError:
            fast = None  # the whole parse says where
        if fast is not None:
            return fast
        return parse_endpoints_file(text=data, source=str(self._path))
