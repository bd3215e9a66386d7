"""Bounds on a ``.tfplace`` archive as a whole (issue 21): its total size and its member count,
and the check that a trace about to be saved stays within every limit it will be opened with.

Each member, and the JSON values of all of them, are bounded by the limits every trace file
is read with (``tfplace_widget._sources.limits``: ``MAX_MEMBER_BYTES``, ``MAX_JSON_VALUES``).
Like those, these are read when a file is opened: a user who trusts a larger file can raise
them (``tfplace_widget._tfplace_format.limits.MAX_ARCHIVE_BYTES = ...``).
"""

from __future__ import annotations

import struct
import sys
from types import ModuleType

from .._model.errors import TraceError
from .._sources import limits as shared

# All members of one .tfplace read together (and the .tfplace file itself).
MAX_ARCHIVE_BYTES = 1 << 30
# Table cells decoded from the typed arrays of one .tfplace (format version 2: ``frame_arrays``),
# the distinct strings of its text columns included. A cell takes at most 8 bytes once decoded
# (a string column's pointer into its dictionary), so this bounds what decoding can take, about
# 512 MB, however small the arrays are packed (one byte per row for a text column's codes). A
# trace of 1,000,000 ops (benchmarks/save_load.py: 1.75M op rows of 17 columns, 1.0M events of 7,
# 0.37M transfers of 5) has about 44 million: 64 million leaves it room, and no more.
MAX_CELLS = 64_000_000
# Members of one .tfplace (a trace writes about ten, plus one per RunMetadata step kept).
MAX_MEMBERS = 10_000
# The zip's central directory: 46 bytes per member plus its name and extra fields.
_DIRECTORY_BYTES_PER_MEMBER = 46 + 2 * 256


def too_large(where: str, what: str, name: str, verb: str = "unpacks to") -> TraceError:
    """The refusal of ``what`` in ``where`` for passing the limit ``name`` (a constant here or
    in ``sources.limits``)."""
    return shared.too_large(where, what, name, verb, _module_of(name))


class ArchiveBudget(shared.Budget):
    """What the members of one ``.tfplace`` have taken so far: their JSON values, their bytes
    against ``MAX_ARCHIVE_BYTES`` and the cells decoded from their arrays against
    ``MAX_CELLS``."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.cells = 0

    def take_cells(self, count: int, what: str) -> None:
        self.cells += count
        if self.cells > MAX_CELLS:
            raise TraceError(
                f"{self.where!r}: with {what}, its tables hold more than {MAX_CELLS:,} cells, "
                f"the limit for one file opened ({__name__}.MAX_CELLS); a trace of 1,000,000 "
                "ops has about 44 million, so this is not a real trace. If you trust the "
                "file and it really is that large, raise the limit."
            )

    def take_bytes(self, count: int, what: str) -> None:
        super().take_bytes(count, what)
        if self.bytes > MAX_ARCHIVE_BYTES:
            raise too_large(self.where, f"with {what}, the members", "MAX_ARCHIVE_BYTES")


def zip_directory_size(data: bytes) -> int | None:
    """The size the zip in ``data`` gives its central directory (which ``zipfile`` reads and
    parses whole before any member), found as ``zipfile`` finds it; ``None`` if not found."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - (1 << 16) - 22))
    if len(data) >= 22 and data[-22:-18] == b"PK\x05\x06" and data[-2:] == b"\0\0":
        end = len(data) - 22  # no comment: where zipfile looks first
    if end < 0 or end + 22 > len(data):
        return None
    size = struct.unpack_from("<L", data, end + 12)[0]
    locator = end - 20
    if locator >= 56 and data[locator : locator + 4] == b"PK\x06\x07":  # ZIP64: its size wins
        record = locator - 56
        if data[record : record + 4] == b"PK\x06\x06":
            size = struct.unpack_from("<Q", data, record + 40)[0]
    return size


def check_zip_directory(data: bytes, where: str) -> None:
    """Refuse a zip whose central directory is larger than ``MAX_MEMBERS`` members need."""
    size = zip_directory_size(data)
    if size is not None and size > MAX_MEMBERS * _DIRECTORY_BYTES_PER_MEMBER:
        raise TraceError(
            f"{where!r}: its zip directory takes {size:,} bytes, more than {MAX_MEMBERS:,} "
            f"members ({__name__}.MAX_MEMBERS) would; a trace has about ten, "
            "so this is not a .tfplace file tfplace_widget wrote."
        )


def check_member_count(count: int, where: str) -> None:
    """Refuse an archive of more than ``MAX_MEMBERS`` members."""
    if count > MAX_MEMBERS:
        raise TraceError(
            f"{where!r} holds {count:,} members, more than {MAX_MEMBERS:,} "
            f"({__name__}.MAX_MEMBERS); a trace has about ten, so this is "
            "not a .tfplace file tfplace_widget wrote."
        )


def check_savable(members: dict[str, bytes], where: str, cells: int = 0, values: int = 0) -> None:
    """Refuse to write a ``.tfplace`` file that these limits would refuse to open (a
    ``ValueError`` saying which limit to raise), so that a saved trace can be opened again;
    ``cells``: those of its typed arrays (``MAX_CELLS``); ``values``: the JSON values its maps
    stand for (``map_arrays``), besides those of its JSON members (``MAX_JSON_VALUES``)."""
    largest = max(members, key=lambda name: len(members[name]))
    total = sum(len(data) for data in members.values())
    values += sum(shared.json_values(d) for name, d in members.items() if name.endswith(".json"))
    for past, what, name in (
        (cells > MAX_CELLS, f"its tables would hold {cells:,} cells,", "MAX_CELLS"),
        (
            len(members[largest]) > shared.MAX_MEMBER_BYTES,
            f"{largest} would take",
            "MAX_MEMBER_BYTES",
        ),
        (total > MAX_ARCHIVE_BYTES, "its members would take", "MAX_ARCHIVE_BYTES"),
        (
            values > shared.MAX_JSON_VALUES,
            f"its JSON would hold {values:,} values,",
            "MAX_JSON_VALUES",
        ),
        (len(members) > MAX_MEMBERS, f"it would have {len(members):,} members,", "MAX_MEMBERS"),
    ):
        if past:
            module = _module_of(name)
            limit = getattr(module, name)
            more = shared.size_text(limit) if name.endswith("_BYTES") else f"{limit:,}"
            raise ValueError(
                f"Cannot save the trace to {where!r}: {what} more than {more}, the limit a "
                f".tfplace file is opened with ({module.__name__}.{name}). Trace "
                "fewer steps, or raise the limit, here and wherever the file will be opened."
            )


def _module_of(name: str) -> ModuleType:
    """The module that holds the limit ``name``: this one, or ``sources.limits``."""
    here = sys.modules[__name__]
    return here if hasattr(here, name) else shared
