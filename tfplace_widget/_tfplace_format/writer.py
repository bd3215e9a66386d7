"""The writer of ``.tfplace`` files (the format: ``layout``): ``trace.save(path)``."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable
from typing import IO, Any, Protocol

import pandas as pd

from .._sources import limits as shared
from . import limits
from .facts_json import facts_to_json
from .frame_json import frame_to_json
from .layout import FORMAT, FORMAT_VERSION, FRAMES, MANIFEST, RAW_NAME, raw_type

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
    for name in FRAMES:
        members[f"frames/{name}.json"] = _json(frame_to_json(getattr(trace, name), f"trace.{name}"))
    xla = getattr(trace, "xla", None)
    if xla is not None and len(xla):
        members["frames/xla.json"] = _json(frame_to_json(xla, "trace.xla"))
    memory = getattr(trace, "memory", None)
    if memory is not None and len(memory):
        members["frames/memory.json"] = _json(frame_to_json(memory, "trace.memory"))
    measured = getattr(trace, "measured", None)
    if measured is not None:
        members["frames/measured.json"] = _json(frame_to_json(measured, "trace.measured"))
    if findings is not None:
        members["frames/findings.json"] = _json(frame_to_json(findings, "trace.findings"))
    members["inputs.json"] = _json(trace.inputs)
    members["log.txt"] = _log_text(trace.log).encode("utf-8", "surrogateescape")
    if trace.facts is not None:
        members["facts.json"] = _json(facts_to_json(trace.facts))
    for name, data in trace.raw.items():
        members[f"raw/{name}"] = bytes(data)
    limits.check_savable(members, where)  # a trace saved is a trace that opens again
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
            "notes": list(trace.notes),
        },
        "members": sorted(members),
        "raw": {name: raw_type(name) for name in trace.raw},
    }

    def write(stream: IO[bytes]) -> None:
        with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
            archive.writestr(MANIFEST, _json(manifest, indent=1))  # first: `unzip -p` shows it
            for name, data in members.items():
                archive.writestr(name, data)

    write_file(where, "the trace", write, overwrite=overwrite)
    return where


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
