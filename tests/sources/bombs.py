"""Decompression bombs, small on disk, made without compressing gigabytes (issue 21).

A block is deflated once and ended with a full flush, after which the compressor starts afresh:
the same bytes then stand for the block again, so a gigabyte of zeros is a thousand copies of
one kilobyte. CRCs are combined as zlib's ``crc32_combine`` does, so every file is valid: an
unbounded reader would unpack all of it and find nothing wrong.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30
_POLY = 0xEDB88320  # CRC-32, reflected


def _multiply(a: int, b: int) -> int:
    """``a * b`` modulo the CRC-32 polynomial (reflected bit order, as in zlib's multmodp)."""
    m, product = 1 << 31, 0
    while True:
        if a & m:
            product ^= b
            if not a & (m - 1):
                return product
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _x_to_the_8n(n: int) -> int:
    """x ** (8 * n) modulo the polynomial: what ``n`` bytes appended do to a CRC."""
    result, square = 1 << 31, 1 << 30  # 1 and x
    exponent = 8 * n
    while exponent:
        if exponent & 1:
            result = _multiply(square, result)
        square = _multiply(square, square)
        exponent >>= 1
    return result


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from A's CRC, B's CRC and B's length."""
    return _multiply(_x_to_the_8n(len2), crc1) ^ crc2


def crc32_repeated(block: bytes, count: int) -> int:
    """The CRC-32 of ``block * count``, by doubling."""
    crc, piece, length = 0, zlib.crc32(block), len(block)
    while count:
        if count & 1:
            crc = crc32_combine(crc, piece, length)
        piece, length, count = crc32_combine(piece, piece, length), 2 * length, count >> 1
    return crc


@dataclass
class Packed:
    """A raw deflate stream, with the CRC-32 and size of what it unpacks to."""

    stream: bytes
    crc: int
    size: int


def deflated(*pieces: tuple[bytes, int]) -> Packed:
    """``b"".join(block * count for block, count in pieces)``, deflated without compressing
    more than one copy of each block."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream, crc, size = [], 0, 0
    for block, count in pieces:
        stream.append((compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)) * count)
        crc = crc32_combine(crc, crc32_repeated(block, count), len(block) * count)
        size += len(block) * count
    stream.append(compressor.flush())
    return Packed(b"".join(stream), crc, size)


def write_gzip(path: Path, packed: Packed, claimed_size: int | None = None) -> Path:
    """A gzip file of ``packed``; ``claimed_size`` for the trailer's length if not the real one
    (the trailer keeps it modulo 2**32, as gzip does)."""
    size = packed.size if claimed_size is None else claimed_size
    trailer = struct.pack("<LL", packed.crc, size & 0xFFFFFFFF)
    path.write_bytes(b"\x1f\x8b\x08\x00\0\0\0\0\x02\xff" + packed.stream + trailer)
    return path


@dataclass
class Member:
    """A zip member: deflated (``packed``) or stored empty; ``claimed_size`` for the size its
    headers give, if not the real one."""

    name: str
    packed: Packed | None = None
    claimed_size: int | None = None


def write_zip(path: Path, members: list[Member]) -> Path:
    """A zip archive of ``members`` (sizes below 4 GiB: no ZIP64 needed)."""
    body, directory = bytearray(), bytearray()
    for member in members:
        name = member.name.encode()
        packed = member.packed or Packed(b"", 0, 0)
        method = 8 if member.packed else 0
        size = packed.size if member.claimed_size is None else member.claimed_size
        sizes = (packed.crc, len(packed.stream), size, len(name))
        offset = len(body)
        body += struct.pack("<4s2B4HL2L2H", b"PK\x03\x04", 20, 0, 0, method, 0, 0x21, *sizes, 0)
        body += name + packed.stream
        directory += struct.pack(
            "<4s4B4HL2L5H2L", b"PK\x01\x02", 20, 3, 20, 0, 0, method, 0, 0x21, *sizes, 0, 0, 0, 0,
            0o100644 << 16, offset,
        )  # fmt: skip
        directory += name
    count = min(len(members), 0xFFFF)  # zipfile reads the directory by its size, not this
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + end))
    return path


def zeros(size: int, block: int = MIB) -> Packed:
    """``size`` zero bytes (a multiple of ``block``), deflated."""
    return deflated((bytes(block), size // block))
