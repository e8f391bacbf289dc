"""A small synchronous client for the control plane's admin API (a CLI has no event loop)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

__all__ = ["AdminClient", "AdminUnreachable"]


class AdminUnreachable(Exception):
    """The admin API did not answer or answered with an error."""


class AdminClient:
    """GET JSON views from ``base_url``."""

    def __init__(self, base_url: str, *, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str) -> Any:
        """The JSON at ``path``; ``AdminUnreachable`` with the reason otherwise."""
        url = self.base_url + path
        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
            raise AdminUnreachable(f"{url}: {exc}") from exc
