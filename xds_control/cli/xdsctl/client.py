"""A small synchronous client for the control plane's admin API (a CLI has no event loop).

It reads the HTTP JSON mirror of the admin API (``/v1/...``), whose shapes docs/xdsctl.md
documents; ``curl`` reads the same."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["AdminClient", "AdminError", "AdminUnreachable", "Unauthorized"]


class AdminError(Exception):
    """The admin API answered with an error; the message is its words."""


class AdminUnreachable(AdminError):
    """The admin API did not answer."""


class Unauthorized(AdminError):
    """The admin API wants a (different) bearer token."""


class AdminClient:
    """GET JSON views from ``base_url``, with ``token`` as a bearer token if given."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def get(self, path: str, **query: str | int | bool) -> Any:
        """The JSON at ``path``; ``AdminError`` with the reason otherwise."""
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items()}
        url = self.base_url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        request = urllib.request.Request(url)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise Unauthorized(f"{url}: the admin API refused the token") from exc
            body = exc.read().decode(errors="replace").strip()
            raise AdminError(f"{url}: HTTP {exc.code}: {body}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise AdminUnreachable(f"{url}: {getattr(exc, 'reason', exc)}") from exc
        except json.JSONDecodeError as exc:
            raise AdminError(f"{url}: not JSON: {exc}") from exc
