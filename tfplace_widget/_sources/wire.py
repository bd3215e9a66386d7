"""Protobuf's wire format walked with numpy: what a message class cannot say cheaply from
Python, counted over many serialized messages at once."""

from __future__ import annotations

import numpy as np

_VARINT_BYTES = 10  # a 64-bit varint's most


def field_counts(joined: bytes, lengths: np.ndarray, number: int) -> np.ndarray | None:
    """How many times field ``number`` occurs in each of the serialized messages whose bytes
    ``joined`` holds one after the other (``lengths`` of them, in order): the fields of
    every message are stepped over together, one field each per round, so a round costs a
    few numpy operations over the messages that still have fields.

    None when the bytes are not what is expected: a field number above 15 (a tag of two
    bytes; none of ``AllocatorMemoryUsed``'s), a group or an unknown wire type, a varint
    longer than 10 bytes, or a field running past its message's end. The caller then reads
    the messages another way."""
    ends = np.cumsum(lengths, dtype=np.int64)
    pos = ends - lengths
    counts = np.zeros(len(lengths), dtype=np.int64)
    buf = np.frombuffer(joined + bytes(_VARINT_BYTES + 1), dtype=np.uint8)  # read past the end
    live = np.flatnonzero(pos < ends)
    while live.size:
        at = pos[live]
        tag = buf[at]
        if (tag >= 0x80).any():
            return None
        wire = tag & 7
        counts[live] += (tag >> 3) == number
        at += 1
        # the varint after the tag: its size, and its value (a length-delimited field's size)
        size = np.ones(len(at), dtype=np.int64)
        value = (buf[at] & 0x7F).astype(np.int64)
        more = np.flatnonzero(buf[at] >= 0x80)
        for shift in range(7, 7 * _VARINT_BYTES, 7):
            if not more.size:
                break
            byte = buf[at[more] + size[more]]
            value[more] |= (byte & 0x7F).astype(np.int64) << shift
            size[more] += 1
            more = more[byte >= 0x80]
        if more.size:
            return None
        length = np.where(wire == 2, size + value, -1)
        step = np.where(wire == 0, size, np.where(wire == 1, 8, np.where(wire == 5, 4, length)))
        if (step <= 0).any():
            return None
        at += step
        if (at > ends[live]).any():
            return None
        pos[live] = at
        live = live[at < ends[live]]
    return counts
