"""Bounds on what a trace file from someone else can make the readers hold (issue 21).

Sizes are counted from the bytes really read while unpacking, never from what a zip or gzip
header claims (a claim above a limit only refuses the file sooner). Each limit leaves several
times the room a real trace of 100,000 ops needs (measured on a generated 100k-op graph on four
CPUs, one traced step): its largest ``.tfplace`` member is 56 MB (``raw/run_metadata_0.pb``), all
members 162 MB, 4.3 million JSON values; TensorFlow's ``timeline.py`` writes its Chrome trace as
65 MB of JSON with 2.0 million values. The limits are read when a file is opened: a user who
trusts a larger file can raise them (``tfplace_widget._sources.limits.MAX_MEMBER_BYTES = ...``).
The limits of a ``.tfplace`` archive as a whole (its total size, its member count) are
``tfplace_widget._tfplace_format.limits``.
"""

from __future__ import annotations

import json
import re
import reprlib
import sys
from types import ModuleType
from typing import IO, Any

from .._model.errors import TraceError

# One unpacked .tfplace member, or one trace file (plain or gunzipped).
MAX_MEMBER_BYTES = 256 << 20
# JSON values in the documents of one file (each costs up to ~70 bytes once parsed, so this
# bounds what parsing can take, about 1 GB, however the values are packed): counted before
# parsing, one per comma and one per list or object (``[[[]]]`` is three values, no comma).
MAX_JSON_VALUES = 16_000_000
# A time or duration in microseconds, in a Chrome trace or a .tfplace frame: below this in
# magnitude (3,000 years; int64 and float64 both hold it exactly enough), a duration not negative.
MAX_ABS_US = 10**17
_CHUNK = 1 << 20


def size_text(limit: int) -> str:
    """A limit as people say it: "256 MiB", "1 GiB"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift:
            return f"{limit / (1 << shift):g} {unit}"
    return f"{limit} bytes"


def shown(value: Any) -> str:
    """A value read from a file, for a message: bounded in depth and length (``repr`` of a
    value nested thousands deep would raise ``RecursionError``)."""
    return reprlib.repr(value)


def too_large(
    where: str, what: str, name: str, verb: str = "unpacks to", limits: ModuleType | None = None
) -> TraceError:
    """The refusal of ``what`` in ``where`` for passing the limit ``name`` (a constant of the
    module ``limits``: this one when not given)."""
    module = limits or sys.modules[__name__]
    return TraceError(
        f"{where!r}: {what} {verb} more than {size_text(getattr(module, name))}, the limit for one "
        f"file opened ({module.__name__}.{name}); a trace of 100,000 ops needs a fraction "
        "of it, so this is not a real trace (it may be a decompression bomb). If "
        "you trust the file and it really is that large, raise the limit."
    )


class Budget:
    """What the documents of one file have taken so far, against the per-file limits (the
    bytes of all members of a ``.tfplace``: ``tfplace_format.limits.ArchiveBudget``)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.bytes = 0
        self.values = 0

    def take_bytes(self, count: int, what: str) -> None:
        self.bytes += count

    def take_values(self, count: int, what: str) -> None:
        self.values += count
        if self.values > MAX_JSON_VALUES:
            raise TraceError(
                f"{self.where!r}: with {what}, the JSON holds more than {MAX_JSON_VALUES:,} "
                "values, the limit for one file opened "
                "(tfplace_widget._sources.limits.MAX_JSON_VALUES); a trace of 100,000 ops has 2 to "
                "4 million, so this is not a real trace. If you trust "
                "the file and it really is that large, raise the limit."
            )


def read_bounded(stream: IO[bytes], where: str, what: str, budget: Budget | None = None) -> bytes:
    """All of ``stream`` (a zip member or a gzip file being unpacked), read in chunks and
    refused as soon as it passes ``MAX_MEMBER_BYTES`` (or ``budget``'s total)."""
    chunks, size = [], 0  # joined once: a growing buffer copies a large member many times
    while chunk := stream.read(_CHUNK):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_MEMBER_BYTES:
            raise too_large(where, what, "MAX_MEMBER_BYTES")
        if budget is not None:
            budget.take_bytes(len(chunk), what)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def json_values(data: bytes) -> int:
    """At least the number of values the JSON ``data`` parses to, counted without parsing it:
    one per comma, one per list or object opened, and one (brackets and commas in strings count
    too: never fewer, so what parsing can take is bounded by this count)."""
    return data.count(b",") + data.count(b"[") + data.count(b"{") + 1


def parse_json(data: bytes, where: str, what: str, budget: Budget | None = None) -> Any:
    """``data`` parsed as JSON; a ``TraceError`` naming ``what`` for more values than
    ``MAX_JSON_VALUES`` (counted before parsing, :func:`json_values`) or nesting deeper than
    Python can parse (a ``RecursionError`` otherwise). ``ValueError`` for JSON that is
    malformed."""
    budget = budget or Budget(where)
    budget.take_values(json_values(data), what)
    try:
        document = json.loads(data)
    except RecursionError:
        raise TraceError(
            f"{where!r}: {what} nests lists or objects deeper than Python can parse, which no "
            "trace does; the file is damaged or was made to crash its reader."
        ) from None
    if _SURROGATE.search(data):  # rare (an emoji as \ud83d\ude00): check the text
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise TraceError(
                f"{where!r}: {what} holds a lone surrogate ({exc.object[exc.start]!r}), text "
                "that no UTF-8 file or terminal can hold; the file is damaged or was made to "
                "break its readers."
            ) from None
    return document


# What a lone surrogate in JSON is written as: an escape \ud800-\udfff, or its UTF-8-like
# bytes (which json.loads lets through).
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
