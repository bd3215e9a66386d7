"""The writer of ``.tfplace`` files (the format: ``layout``): ``trace.save(path)``."""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from collections.abc import Callable
from typing import IO, Any, Protocol

import pandas as pd

from .._sources import limits as shared
from . import limits
from .facts_json import facts_to_json, take_maps
from .frame_arrays import frame_to_members
from .layout import FORMAT, FORMAT_VERSION, FRAMES, MANIFEST, OPTIONAL_FRAMES, RAW_NAME, raw_type
from .map_arrays import maps_to_members

# How the file is written: ``write_file(path, what, write, overwrite=...)`` calls ``write`` on
# a stream and puts the result at ``path`` (``export.output.write_atomically``: whole or not
# at all, errors naming the path).
WriteFile = Callable[..., None]


class Savable(Protocol):
    """What :func:`save` reads of a trace (a ``PlacementTrace``)."""

    ops: pd.DataFrame
    events: pd.DataFrame
    transfers: pd.DataFrame
    devices: list[str]
    inputs: dict[str, list[str]]
    log: str
    source: str
    truncated: bool
    mode: str
    mode_reason: str
    notes: list[str]
    facts: Any
    predicted: bool
    raw: dict[str, bytes]


def save(
    trace: Savable,
    path: str | os.PathLike,
    *,
    write_file: WriteFile,
    overwrite: bool = True,
    findings: pd.DataFrame | None = None,
) -> str:
    """Write ``trace`` (and its ``findings``, when computed) to ``path`` as a ``.tfplace`` file
    (see ``layout``) with ``write_file``; return the path. The file appears complete or not at
    all; a :class:`TraceWriteError` names the path when it cannot be written (a
    ``FileExistsError`` too when it exists and not ``overwrite``)."""
    from .._model.version import __version__

    where = os.fspath(path)
    bad = [name for name in trace.raw if not RAW_NAME.match(name)]
    if bad:
        raise ValueError(f"trace.raw names must be plain file names, not {bad[0]!r}.")
    members: dict[str, bytes] = {}
    cells = 0
    for name, frame in _frames(trace, findings).items():
        document, arrays, count = frame_to_members(frame, name, f"trace.{name}")
        members[f"frames/{name}.json"] = _json(document)
        members.update(arrays)
        cells += count
    maps: dict[str, tuple[str, dict]] = {"inputs": ("names", trace.inputs)}
    if trace.facts is not None:
        facts = facts_to_json(trace.facts)
        maps.update(take_maps(facts))  # the per-op maps as arrays, the rest JSON
        members["facts.json"] = _json(facts)
    document, arrays, map_cells, values = maps_to_members(maps)
    members["maps.json"] = _json(document)
    members.update(arrays)
    cells += map_cells
    members["log.txt"] = _log_text(trace.log).encode("utf-8", "surrogateescape")
    for name, data in trace.raw.items():
        members[f"raw/{name}"] = bytes(data)
    notes = list(trace.notes)
    left_out = _leave_out_raw(members)
    if left_out:
        notes.append(left_out)
        warnings.warn(f"{where}: {left_out}", UserWarning, stacklevel=3)
    limits.check_savable(members, where, cells, values)  # a trace saved is a trace that opens again
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "written_by": f"tfplace_widget {__version__}",
        "trace": {
            "devices": list(trace.devices),
            "source": trace.source,
            "mode": trace.mode,
            "mode_reason": trace.mode_reason,
            "truncated": bool(trace.truncated),
            "predicted": bool(trace.predicted),
            "notes": notes,
        },
        "members": sorted(members),
        "raw": {name: raw_type(name) for name in trace.raw if f"raw/{name}" in members},
    }

    def write(stream: IO[bytes]) -> None:
        # deflate's fastest level: a third of level 6's time (most of saving 1M ops), and
        # typed arrays and dictionaries leave it little to find that level 6 would
        with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            archive.writestr(MANIFEST, _json(manifest, indent=1))  # first: `unzip -p` shows it
            for name, data in members.items():
                archive.writestr(name, data)

    write_file(where, "the trace", write, overwrite=overwrite)
    return where


def _frames(trace: Savable, findings: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """The frames to save, by name: ``FRAMES``, then those of ``OPTIONAL_FRAMES`` the trace has
    (``xla`` and ``memory`` when they have rows: an empty one is what a file without it loads
    with)."""
    frames = {name: getattr(trace, name) for name in FRAMES}
    for name in OPTIONAL_FRAMES:
        frame = findings if name == "findings" else getattr(trace, name, None)
        if frame is not None and (len(frame) or name not in ("xla", "memory")):
            frames[name] = frame
    return frames


def _leave_out_raw(members: dict[str, bytes]) -> str:
    """Leave out of ``members`` the ``raw/`` members past the limits a file is opened with (one
    past ``MAX_MEMBER_BYTES``; then, the last first, those that take the members past
    ``MAX_ARCHIVE_BYTES``), so that the trace is saved without them rather than not at all;
    a note saying which ("" when none)."""
    raw = [name for name in members if name.startswith("raw/")]
    left: dict[str, int] = {}
    for name in raw:
        if len(members[name]) > shared.MAX_MEMBER_BYTES:
            left[name] = len(members.pop(name))
    total = sum(len(data) for data in members.values())
    for name in reversed([n for n in raw if n in members]):
        if total <= limits.MAX_ARCHIVE_BYTES:
            break
        left[name] = len(members.pop(name))
        total -= left[name]
    if not left:
        return ""
    sizes = ", ".join(f"{name} ({size / 1e6:,.0f} MB)" for name, size in left.items())
    return (
        f"This file leaves out {sizes} of trace.raw: with them it would pass the limits a "
        ".tfplace file is opened with (sources.limits.MAX_MEMBER_BYTES, "
        "tfplace_format.limits.MAX_ARCHIVE_BYTES). The frames, findings and facts are whole."
    )


def _log_text(log: str) -> str:
    """``log``, or its start and end with a line saying how much was cut between them, so that
    ``log.txt`` fits in ``sources.limits.MAX_MEMBER_BYTES`` (a program that printed gigabytes while
    traced still saves its trace: a character takes at most 4 bytes)."""
    keep = shared.MAX_MEMBER_BYTES // 10  # characters at each end: at most 80% of the limit
    if len(log) <= 2 * keep:
        return log
    cut = len(log) - 2 * keep
    return (
        f"{log[:keep]}\n[tfplace: {cut:,} characters of this log were cut here when the trace "
        f"was saved, to fit limits.MAX_MEMBER_BYTES; trace.log held {len(log):,}]\n{log[-keep:]}"
    )


def _json(value: Any, indent: int | None = None) -> bytes:
    return json.dumps(value, allow_nan=False, ensure_ascii=False, indent=indent).encode()
