"""The data path's IO edge: Envoy's gRPC access-log service in, data-path samples out.

``AccessLogServicer`` serves ``envoy.service.accesslog.v3.AccessLogService`` on the ADS port
(``server/grpc_server.py``): every Envoy whose listeners carry the data-path access log
(``xds/access_log.py``) streams its HTTP entries to it; each becomes an ``Observation`` (a
request that ended) or a ``Progress`` (one still running) in the shared ``DataPathWindow``.
``DataPathSource`` reads that window as a ``SignalSource``: no IO, so its ``fetch`` is as
cheap as the window's sums.

The servicer never raises into gRPC: an entry it cannot read is counted (``bad``) and skipped,
and a stream that fails ends with an empty response.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any

import grpc
import structlog
from envoy.service.accesslog.v3 import als_pb2

from xds_control.config.signals import DataPathConfig
from xds_control.signals.data_path import DataPathWindow
from xds_control.signals.latency import P99Readings
from xds_control.signals.metrics import DATA_PATH_ENTRIES, DATA_PATH_STREAMS
from xds_control.signals.observation import Progress, from_entry
from xds_control.signals.sample import Sample
from xds_control.signals.source import Target

__all__ = [
    "ACCESS_LOG_SERVICE",
    "AccessLogServicer",
    "DataPath",
    "DataPathLatency",
    "DataPathSource",
]

log = structlog.get_logger(__name__)

ACCESS_LOG_SERVICE = "envoy.service.accesslog.v3.AccessLogService"

_OUTCOMES = ("counted", "running", "skipped", "dropped", "bad")


class DataPath:
    """The data path's state: whether it is on and its window, (re)set from the config; the
    servicer writes to it and the source reads it."""

    def __init__(self, *, config: DataPathConfig | None = None) -> None:
        self.enabled = False
        self.window = DataPathWindow()
        self.configure(config or DataPathConfig())

    def configure(self, config: DataPathConfig) -> None:
        """Turn it on or off; a new ``window_s`` starts a new, empty window."""
        self.enabled = config.on
        if config.window_s != self.window.window_s:
            self.window = DataPathWindow(window_s=config.window_s)


class AccessLogServicer:
    """``StreamAccessLogs``: each HTTP entry of each message into ``data_path``'s window,
    placed by ``clock`` (Unix seconds). Entries arriving while the data path is off are
    dropped (counted)."""

    def __init__(self, *, data_path: DataPath, clock: Callable[[], float] = time.time) -> None:
        self._data_path = data_path
        self._clock = clock
        self._counters = {o: DATA_PATH_ENTRIES.labels(outcome=o) for o in _OUTCOMES}

    def generic_handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The handler to add to a grpc.aio server."""
        return grpc.method_handlers_generic_handler(
            ACCESS_LOG_SERVICE,
            {
                "StreamAccessLogs": grpc.stream_unary_rpc_method_handler(
                    self.stream,
                    request_deserializer=als_pb2.StreamAccessLogsMessage.FromString,
                    response_serializer=als_pb2.StreamAccessLogsResponse.SerializeToString,
                )
            },
        )

    async def stream(
        self,
        requests: AsyncIterator[als_pb2.StreamAccessLogsMessage],
        context: grpc.aio.ServicerContext[Any, Any] | None = None,
    ) -> als_pb2.StreamAccessLogsResponse:
        """Take messages until Envoy closes the stream (it never waits for the answer)."""
        DATA_PATH_STREAMS.inc()
        node = ""
        try:
            async for message in requests:
                if message.HasField("identifier"):
                    node = message.identifier.node.id
                self.take(message)
        except Exception as exc:  # a bad frame or a broken stream must not crash the server
            log.warning("access-log stream failed", node=node, error=repr(exc))
        return als_pb2.StreamAccessLogsResponse()

    def take(self, message: als_pb2.StreamAccessLogsMessage) -> None:
        """Count one message's HTTP entries into the window (TCP entries are not requests)."""
        counts = dict.fromkeys(_OUTCOMES, 0)
        data_path = self._data_path
        now = self._clock()
        for entry in message.http_logs.log_entry:
            if not data_path.enabled:
                counts["dropped"] += 1
                continue
            try:
                observation = from_entry(entry)
            except Exception:  # a field out of any range Envoy sends: not worth the stream
                counts["bad"] += 1
                continue
            if observation is None:
                counts["skipped"] += 1
            elif isinstance(observation, Progress):
                kept = data_path.window.progress(observation, now=now)
                counts["running" if kept else "dropped"] += 1
            elif data_path.window.add(observation, now=now):
                counts["counted"] += 1
            else:
                counts["dropped"] += 1
        for outcome, count in counts.items():
            if count:
                self._counters[outcome].inc(count)


class DataPathSource:
    """A ``SignalSource`` over the data path's window: the samples of the targets that had a
    request in it."""

    def __init__(self, *, data_path: DataPath, clock: Callable[[], float] = time.time) -> None:
        self._data_path = data_path
        self._clock = clock

    async def fetch(self, targets: Collection[Target]) -> Mapping[str, Sample]:
        """Samples for ``targets`` now, keyed by address, each with its TTFT compliance
        against its pool's target; never raises."""
        return self._data_path.window.samples(
            [t.address for t in targets],
            now=self._clock(),
            ttft_targets={t.address: t.ttft_slo_s for t in targets},
        )


class DataPathLatency:
    """A ``P99Source`` over the data path's window: each endpoint's P99 time to first byte as
    Envoy measured it (the first token, for a server that sends its headers with it, as vLLM
    and the simulator do), for any server; no time per output token (the data path's is per
    byte). ``window`` is ignored: the readings span the data path's own ``window_s``."""

    def __init__(self, *, data_path: DataPath, clock: Callable[[], float] = time.time) -> None:
        self._data_path = data_path
        self._clock = clock

    async def fetch(self, *, window: str) -> P99Readings:
        """Every endpoint's P99 TTFB now; never raises."""
        del window
        return P99Readings(ttft_s=self._data_path.window.ttfb_p99(now=self._clock()), tpot_s={})
