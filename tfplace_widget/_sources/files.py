"""Trace files on disk: which reader a path needs, and its bytes (gunzipped when gzip)."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import Any

from .._model.errors import TraceError, read_file
from .._tfadapter.protos import graph_def_type
from . import limits


def trace_format(path: str | os.PathLike) -> str:
    """``"chrome"`` (``.json``), ``"xspace"`` (``.xplane.pb``: a TF2 profile), ``"text"``
    (``.pbtxt``/``.txt``) or ``"binary"`` (anything else: a serialized RunMetadata), by the
    name's suffix, any case, a ``.gz`` after it ignored."""
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".json"):
        return "chrome"
    if name.endswith(".xplane.pb"):
        return "xspace"
    if name.endswith((".pbtxt", ".txt")):
        return "text"
    return "binary"


_DEFLATE_MAX_RATIO = 1032  # the most deflate unpacks one byte to (258 bytes from 2 bits)


def read_trace_bytes(where: str) -> bytes:
    """The bytes of a trace file, gunzipped when it is gzip (``.gz``, or by its magic bytes).

    A missing file raises :class:`~tfplace_widget.TraceFileNotFound` (a ``TraceError``
    and a ``FileNotFoundError``); another unreadable one a ``TraceError``, and so does a file
    that is, or unpacks to, more than ``limits.MAX_MEMBER_BYTES`` (counted as it is read).
    """
    raw = read_file(where, "trace file", limit=limits.MAX_MEMBER_BYTES)
    if len(raw) > limits.MAX_MEMBER_BYTES:
        raise limits.too_large(where, "the file", "MAX_MEMBER_BYTES", "is")
    if raw[:2] != b"\x1f\x8b":
        return raw
    # The trailer's length (modulo 2**32) is a floor for the last gzip member's: a claim above
    # the limit refuses the file at once, if deflate can reach it from this many bytes (at most
    # 1032 times as many); a claim it cannot reach is no trailer (a truncated file, which
    # unpacking says), and a lower one is checked against the bytes unpacked.
    claim = int.from_bytes(raw[-4:], "little") if len(raw) >= 18 else 0
    if limits.MAX_MEMBER_BYTES < claim <= _DEFLATE_MAX_RATIO * len(raw):
        raise limits.too_large(where, "the gzip file", "MAX_MEMBER_BYTES")
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as unpacked:
            return limits.read_bounded(unpacked, where, "the gzip file")
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(
            f"{where!r} is a gzip file that cannot be decompressed (it may be truncated): "
            f"{exc}. Write it again with gzip.open(path, 'wb')."
        ) from exc


def parse_text_proto(
    data: bytes, message: Any, path: str, fix: str, error: type[Exception] = TraceError
) -> Any:
    """``message`` filled from the text-format ``data`` of ``path``; ``error`` naming the file,
    what is wrong and ``fix`` (how to write a good one) if it does not parse."""
    from google.protobuf import text_format

    try:
        text_format.Parse(data.decode("utf-8"), message)
    except Exception as exc:
        raise error(f"{path!r} is not a text {type(message).__name__} ({exc}). {fix}") from exc
    return message


def read_graph_file(path: str) -> Any:
    """A GraphDef (text files) or its bytes (binary files) from ``path``."""
    data = read_file(path, "the graph file", error=ValueError)
    if trace_format(path) != "text":
        return data
    fix = "Write one with tf.io.write_graph(graph, folder, name, as_text=True)."
    return parse_text_proto(data, graph_def_type()(), path, fix, error=ValueError)
