"""Just enough protobuf wire format to frame prepared bytes.

A message's encoding is the concatenation of its fields' encodings, and a parser merges
concatenated encodings. So a ``DiscoveryResponse`` can be assembled from pieces serialised once
per version (header fields, one framed ``Any`` per resource) plus the stream's own nonce.
"""

from __future__ import annotations

__all__ = ["length_delimited", "varint"]


def varint(value: int) -> bytes:
    """Base-128 varint of a non-negative int."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` with wire type 2 (bytes, string, embedded message)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload
