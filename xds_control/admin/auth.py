"""Who may read the admin API: anyone on loopback, a bearer token's holder elsewhere.

Bound to loopback the admin API is open (only local users reach it). Bound to any other address
it refuses to start without a token, and every HTTP request and gRPC call must carry
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from aiohttp import web

from xds_control.errors import ServeError

__all__ = ["TOKEN_ENV", "grpc_interceptor", "http_middleware", "is_loopback", "load_token"]

TOKEN_ENV = "XDS_CONTROL_ADMIN_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_token(token_file: Path | None) -> str | None:
    """The token from ``token_file``, else from ``XDS_CONTROL_ADMIN_TOKEN``, else ``None``."""
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ServeError(f"admin token file {token_file}: {exc.strerror}") from exc
        if not token:
            raise ServeError(f"admin token file {token_file} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def _allowed(header: str | None, token: str) -> bool:
    expected = f"Bearer {token}"
    return header is not None and hmac.compare_digest(header.encode(), expected.encode())


def http_middleware(token: str) -> Any:
    """An aiohttp middleware answering 401 to a request without the token (``/healthz`` and
    ``/readyz`` stay open for probes)."""

    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path in {"/healthz", "/readyz"} or _allowed(
            request.headers.get("Authorization"), token
        ):
            return await handler(request)
        return web.Response(status=401, text="admin API: missing or wrong bearer token\n")

    return check


if TYPE_CHECKING:
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
    _Handler = grpc.RpcMethodHandler[Any, Any]
else:  # grpc-stubs makes them generic; grpcio's classes are not subscriptable
    _Interceptor = grpc.aio.ServerInterceptor


class _TokenInterceptor(_Interceptor):
    def __init__(self, token: str) -> None:
        self._token = token

        async def deny(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "admin API: missing or wrong bearer token"
            )

        self._deny = grpc.unary_unary_rpc_method_handler(deny)
        self._deny_stream = grpc.unary_stream_rpc_method_handler(deny)

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler:
        metadata = dict(handler_call_details.invocation_metadata or ())
        header = metadata.get("authorization")
        if isinstance(header, str) and _allowed(header, self._token):
            return await continuation(handler_call_details)
        method = handler_call_details.method or ""
        return self._deny_stream if method.endswith("/WatchWeights") else self._deny


def grpc_interceptor(token: str) -> grpc.aio.ServerInterceptor[Any, Any]:
    """A server interceptor refusing calls without the token (UNAUTHENTICATED)."""
    return _TokenInterceptor(token)
