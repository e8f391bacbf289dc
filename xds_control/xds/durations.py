"""Protobuf well-known-type helpers shared by the builders."""

from __future__ import annotations

from google.protobuf import any_pb2, duration_pb2, wrappers_pb2
from google.protobuf.message import Message

__all__ = ["duration", "pack", "u32"]


def duration(seconds: float) -> duration_pb2.Duration:
    """Seconds -> ``Duration`` (nanosecond precision)."""
    whole = int(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=round((seconds - whole) * 1e9))


def u32(value: int) -> wrappers_pb2.UInt32Value:
    """int -> ``UInt32Value``."""
    return wrappers_pb2.UInt32Value(value=value)


def pack(message: Message) -> any_pb2.Any:
    """Wrap a message in ``Any`` with the canonical type URL."""
    out = any_pb2.Any()
    out.Pack(message)
    return out
