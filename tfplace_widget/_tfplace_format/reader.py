"""The reader of ``.tfplace`` files (the format: ``layout``): ``PlacementTrace.load(path)``."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._model.errors import FrameFormatError, TraceError, read_file
from .._model.graphfacts import GraphFacts
from .._sources import limits as shared
from .._sources.limits import shown
from . import limits
from .facts_json import MAPS as FACT_MAPS
from .facts_json import facts_from_json, names_map, put_maps
from .frame_arrays import ArrayReader, frame_from_members, member_prefix
from .layout import FORMAT, FORMAT_VERSION, FRAMES, MANIFEST, OPTIONAL_FRAMES, RAW_NAME, SUFFIX
from .map_arrays import PREFIX as MAP_PREFIX
from .map_arrays import maps_from_members
from .schema import check_frame, text_columns_of_empty
from .upgrades import add_memory_kind, add_missing_columns, current_findings, written_here

_MISSING: Any = object()
# A device as TensorFlow names it in full (device_name_utils.cc: job names and types are a
# letter, then letters, digits and underscores).
# A full device name; or the profiler's host plane, for the host ops of a TF2 profile read
# without its graph (PlacementTrace.from_xspace), whose device the profile does not say.
HOST_DEVICE = "/host:CPU"
_DEVICE = re.compile(
    r"/job:[A-Za-z]\w*/replica:\d+/task:\d+/device:[A-Za-z]\w*:\d+|" + re.escape(HOST_DEVICE),
    re.ASCII,
)
_SAVE_FIX = "Save the trace again with trace.save(path)."


def is_archive(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a ``.tfplace`` file (by suffix, any case) or starts like a zip."""
    where = os.fspath(path)
    if where.lower().endswith(SUFFIX):
        return True
    try:
        with open(where, "rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


@dataclass
class SavedTrace:
    """What one ``.tfplace`` file holds, checked: ``PlacementTrace(**fields)``, then the
    attributes set on it (``PlacementTrace.load`` builds the trace; this module does not know
    the class)."""

    fields: dict[str, Any]
    facts: GraphFacts | None = None
    measured: pd.DataFrame | None = None
    # The findings saved with the trace, when this version wrote them (``upgrades``).
    findings: pd.DataFrame | None = None
    raw: dict[str, bytes] = field(default_factory=dict)


def read(path: str | os.PathLike) -> SavedTrace:
    """What :func:`~tfplace_widget._tfplace_format.writer.save` wrote to ``path``, upgraded to
    the columns of a trace made now.

    A missing file is a ``TraceFileNotFound``; a file that is not a ``.tfplace`` archive, a
    damaged one, one written by a newer version (``version`` above ``FORMAT_VERSION``), one
    past the size limits (``sources.limits``, ``tfplace_format.limits``) or one whose frames
    lack a column or hold the wrong kind of values in one (``schema``) is a
    :class:`TraceError` naming the file, the member and what to do.
    """
    reader = _Reader(os.fspath(path))
    with reader.archive, _collection_paused():
        manifest = reader.json(MANIFEST)
        _check_manifest(manifest, reader.where)
        info = reader.field(manifest, "trace", dict, "an object")
        frames = {name: reader.frame(name) for name in FRAMES}
        predicted = reader.field(info, "predicted", bool, "true or false")
        add_missing_columns(frames, predicted)
        optional = {
            name: reader.frame(name)
            for name in OPTIONAL_FRAMES
            if f"frames/{name}.json" in reader.names
            and (name != "findings" or written_here(manifest))
        }
        # measured and findings are set on the trace made; the others are its fields
        frames.update({n: f for n, f in optional.items() if n not in ("measured", "findings")})
        add_memory_kind(frames)
        devices = reader.devices(info)
        reader.check_devices(frames, devices)
        # format 3: trace.inputs and the facts' per-op maps as arrays; before: JSON objects
        maps = reader.maps() if "maps.json" in reader.names else None
        saved = SavedTrace(
            fields=dict(
                **frames,
                devices=devices,
                inputs=reader.inputs() if maps is None else maps.pop("inputs"),
                log=reader.read("log.txt").decode("utf-8", "surrogateescape"),
                source=reader.field(info, "source", str, "a string"),
                truncated=reader.field(info, "truncated", bool, "true or false"),
                mode=reader.field(info, "mode", str, "a string"),
                mode_reason=reader.field(info, "mode_reason", str, "a string", default=""),
                notes=reader.field(info, "notes", list, "a list of strings", str),
                predicted=predicted,
            )
        )
        if "facts.json" in reader.names:
            if HOST_DEVICE in devices:  # a trace with its graph places every op
                raise reader.damaged(
                    MANIFEST, f"devices has {HOST_DEVICE!r} in a trace with graph facts"
                )
            saved.facts = reader.facts(maps)
        saved.measured = optional.get("measured")
        if "findings" in optional:
            saved.findings = current_findings(optional["findings"])
        saved.raw = {name[len("raw/") :]: reader.read(name) for name in _raw_members(reader.names)}
    return saved


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (as it was after): reading a large trace makes
    millions of lists and strings that hold no cycles, and each full collection would walk
    them all again (a third of the time of reading 100k ops' maps)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# The members :func:`read` reads (those present), besides raw/ and the frames' arrays.
_MEMBERS = (MANIFEST, *(f"frames/{n}.json" for n in (*FRAMES, *OPTIONAL_FRAMES)))
_MEMBERS += ("inputs.json", "maps.json", "log.txt", "facts.json")
_ARRAYS = (*(member_prefix(name) for name in (*FRAMES, *OPTIONAL_FRAMES)), MAP_PREFIX)


def _raw_members(names: Any) -> list[str]:
    """The ``raw/<name>`` members read back: plain file names only (never a path)."""
    return [n for n in names if n.startswith("raw/") and RAW_NAME.match(n[len("raw/") :])]


class _Reader:
    """One ``.tfplace`` file opened for :func:`read`: its members read by name into memory
    (never extracted), within the limits (``sources.limits``, ``tfplace_format.limits``), each error naming the member."""

    def __init__(self, where: str) -> None:
        self.where = where
        data = read_file(where, "trace file", limit=limits.MAX_ARCHIVE_BYTES)
        if len(data) > limits.MAX_ARCHIVE_BYTES:
            raise limits.too_large(where, "the file", "MAX_ARCHIVE_BYTES", "is")
        if data[:4] != b"PK\x03\x04":
            raise TraceError(
                f"{where!r} is not a .tfplace file (not a zip archive). {_what_it_is(data)}"
            )
        limits.check_zip_directory(data, where)  # before zipfile parses the whole directory
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise TraceError(f"{where!r} is a damaged .tfplace file ({exc}). {_SAVE_FIX}") from exc
        limits.check_member_count(len(self.archive.infolist()), where)
        self.names = self.archive.namelist()
        self.budget = limits.ArchiveBudget(where)
        if MANIFEST not in self.names:
            raise TraceError(
                f"{where!r}: it is a zip, but not a .tfplace file (it has no {MANIFEST}). "
                f"{_SAVE_FIX}"
            )
        self._check_claimed_sizes()

    def _check_claimed_sizes(self) -> None:
        """Refuse at once a member, or all of them, whose size as the zip claims it is past the
        limits (a claim may be low: ``read`` counts the bytes really unpacked)."""
        total = 0
        arrays = [n for n in self.names if n.startswith(_ARRAYS)]
        for name in [*_MEMBERS, *arrays, *_raw_members(self.names)]:
            if name not in self.names:
                continue
            claimed = self.archive.getinfo(name).file_size
            total += claimed
            if claimed > shared.MAX_MEMBER_BYTES:
                raise limits.too_large(self.where, name, "MAX_MEMBER_BYTES", "would unpack to")
            if total > limits.MAX_ARCHIVE_BYTES:
                what = f"with {name}, the members"
                raise limits.too_large(self.where, what, "MAX_ARCHIVE_BYTES", "would unpack to")

    def damaged(self, name: str, problem: Any) -> TraceError:
        return TraceError(
            f"{self.where!r} is a damaged .tfplace file ({name}: {problem}). {_SAVE_FIX}"
        )

    def read(self, name: str) -> bytes:
        if name not in self.names:
            raise TraceError(
                f"{self.where!r} is a damaged .tfplace file: it has no {name}. {_SAVE_FIX}"
            )
        try:
            with self.archive.open(name) as member:
                return shared.read_bounded(member, self.where, name, self.budget)
        except TraceError:
            raise
        # CRC, truncation, a bad deflate stream, encryption, an unknown compression method
        except (
            zipfile.BadZipFile,
            OSError,
            EOFError,
            ValueError,
            zlib.error,
            RuntimeError,
            NotImplementedError,
        ) as exc:
            raise self.damaged(name, exc) from exc

    def json(self, name: str) -> Any:
        try:
            return shared.parse_json(self.read(name), self.where, name, self.budget)
        except ValueError as exc:
            raise self.damaged(name, exc) from exc

    def strings(self, name: str) -> Any:
        """A text column's distinct strings (``frame_arrays``), each a cell
        (``limits.MAX_CELLS``)."""
        data = self.read(name)
        self.budget.take_cells(shared.json_values(data), name)
        try:  # its values counted as cells, not against MAX_JSON_VALUES
            return shared.parse_json(data, self.where, name, shared.Budget(self.where))
        except ValueError as exc:
            raise self.damaged(name, exc) from exc

    def frame(self, name: str) -> Any:
        """``trace.<name>`` from ``frames/<name>.json`` and its arrays, checked against the
        frame schema."""
        member = f"frames/{name}.json"
        arrays = ArrayReader(name, self.read, self.strings, self.budget.take_cells)
        try:
            frame = frame_from_members(self.json(member), arrays)
        except FrameFormatError as exc:
            raise self.damaged(member, exc) from exc
        problem = check_frame(frame, name)
        if problem:
            raise TraceError(
                f"{self.where!r}: {member} cannot be trace.{name}: {problem}. The file was "
                f"changed after it was saved, or not written by tfplace_widget. {_SAVE_FIX}"
            )
        return text_columns_of_empty(frame, name)

    def inputs(self) -> dict[str, list[str]]:
        value = self.json("inputs.json")
        try:
            if not isinstance(value, dict):
                raise ValueError("it is not an object")
            return names_map(value, "the inputs")
        except ValueError as exc:
            raise self.damaged("inputs.json", exc) from exc

    def maps(self) -> dict[str, dict]:
        """``trace.inputs`` and the facts' per-op maps, from ``maps.json`` and its arrays."""
        arrays = ArrayReader("", self.read, self.strings, self.budget.take_cells, MAP_PREFIX)
        kinds = {"inputs": "names", **FACT_MAPS}
        try:
            maps = maps_from_members(self.json("maps.json"), kinds, arrays, self.budget.take_values)
        except (FrameFormatError, KeyError, TypeError) as exc:  # a part missing, or not text
            raise self.damaged("maps.json", exc) from exc
        if "inputs" not in maps:
            raise self.damaged("maps.json", "it has no map 'inputs'")
        return maps

    def facts(self, maps: dict[str, dict] | None) -> Any:
        document = self.json("facts.json")
        try:
            if maps is not None:
                put_maps(document, maps)
            return facts_from_json(document)
        except (KeyError, TypeError, ValueError) as exc:
            raise self.damaged("facts.json", exc) from exc

    def devices(self, info: dict) -> list[str]:
        """The trace's devices: full TensorFlow device names, as tracing writes them."""
        devices = self.field(info, "devices", list, "a list of strings", str)
        odd = next((d for d in devices if not _DEVICE.fullmatch(d)), None)
        if odd is not None:
            raise self.damaged(
                MANIFEST,
                f"devices has {odd[:80]!r}, not a full device name such as "
                "'/job:localhost/replica:0/task:0/device:CPU:0'",
            )
        return devices

    def check_devices(self, frames: dict[str, Any], devices: list[str]) -> None:
        """Every op and event is on one of the manifest's ``devices`` (as tracing writes it):
        a device the panel has no chip for, and no colour given, is a damaged file."""
        known = set(devices)
        for name in ("ops", "events", "memory"):
            if name not in frames:
                continue
            odd = next((d for d in frames[name]["device"].unique() if d not in known), None)
            if odd is not None:
                raise self.damaged(
                    f"frames/{name}.json",
                    f"device {str(odd)[:100]!r} is not one of the {len(known):,} devices of "
                    f"{MANIFEST}",
                )

    def field(
        self,
        holder: dict,
        key: str,
        kind: type,
        expected: str,
        item: type | None = None,
        default: Any = _MISSING,
    ) -> Any:
        """``holder[key]`` from the manifest, when it is a ``kind`` (of ``item`` values)."""
        value = holder.get(key, default)
        if value is _MISSING:
            raise self.damaged(MANIFEST, f"it has no {key!r}")
        if type(value) is not kind or (
            item is not None and not all(type(v) is item for v in value)
        ):
            raise self.damaged(MANIFEST, f"{key} is {shown(value)}, not {expected}")
        return value


def _what_it_is(data: bytes) -> str:
    """A hint for a file that is not an archive: which reader it needs."""
    head = data[:64].lstrip()
    if data[:2] == b"\x1f\x8b" or head[:1] in (b"{", b"["):
        return "It looks like a Chrome trace: open it with PlacementTrace.from_chrome_trace(path)."
    if not data:
        return "It is empty: " + _SAVE_FIX
    return (
        "A RunMetadata file opens with PlacementTrace.from_run_metadata(path); a .tfplace file "
        "is written by trace.save(path)."
    )


def _check_manifest(manifest: Any, where: str) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise TraceError(
            f"{where!r} is a zip with a {MANIFEST}, but not a tfplace_widget trace (its format "
            f"is {shown(manifest.get('format') if isinstance(manifest, dict) else None)}). "
            f"{_SAVE_FIX}"
        )
    version = manifest.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceError(f"{where!r} has an invalid format version {shown(version)}. {_SAVE_FIX}")
    if version > FORMAT_VERSION:
        from .._model.version import __version__

        raise TraceError(
            f"{where!r} was written by a newer tfplace_widget ({shown(manifest.get('written_by'))}, "
            f"trace format {version}); this one (tfplace_widget {__version__}) reads formats up "
            f"to {FORMAT_VERSION}. Upgrade: pip install -U tfplace_widget."
        )
