"""``trace.save(path)`` and ``PlacementTrace.load(path)``: one ``.tfplace`` file per trace.

The format (version 1) is a zip archive (deflate) of plain documents, readable with any zip
tool and a JSON parser, and safe to open: nothing in it is executed or unpickled, members are
read by name into memory (never extracted to disk), and every field is type-checked on load.

========================  =====================================================================
member                    what it holds
========================  =====================================================================
``tfplace.json``          the manifest: ``format`` ("tfplace_widget trace"), ``version``, the
                          writer's version, and the trace's small fields (``devices``,
                          ``source``, ``mode``, ``mode_reason``, ``truncated``, ``predicted``,
                          ``notes``) and the list of ``raw`` members with their proto type
``frames/ops.json``       ``trace.ops``, column-wise, with each column's dtype (``frame_json``)
``frames/events.json``    ``trace.events``
``frames/transfers.json`` ``trace.transfers``
``frames/findings.json``  ``trace.findings``, when it had been computed (the panel computes it);
                          read back only by the version that wrote it (others find them again)
``inputs.json``           ``trace.inputs`` (op -> producers)
``log.txt``               ``trace.log`` (UTF-8)
``facts.json``            ``trace.facts`` field by field (``facts_json``), when present
``raw/<name>``            ``trace.raw``: the protos the trace was made from (graph mode:
                          ``run_metadata_<step>.pb`` and ``graph_def.pb``; TF2 code:
                          ``xspace.pb``, ``function_graphs.pb`` and ``functions.json``), kept
                          as they were for a later version to re-derive columns from
========================  =====================================================================

JSON and not Parquet: a shared file must open wherever tfplace_widget is installed, and
pyarrow is optional. Column-wise JSON of a 100k-op trace deflates to a few MB and round-trips
every dtype exactly. A reader refuses a newer ``version`` (with the upgrade to install), and
ignores members and manifest keys it does not know, so additions within a version stay
readable by older readers.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from typing import IO, TYPE_CHECKING, Any

from ..errors import TraceError, read_file
from .facts_json import facts_from_json, facts_to_json
from .frame_json import FrameFormatError, frame_from_json, frame_to_json
from .output import write_atomically

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import PlacementTrace

FORMAT = "tfplace_widget trace"
FORMAT_VERSION = 1
SUFFIX = ".tfplace"
MANIFEST = "tfplace.json"
FRAMES = ("ops", "events", "transfers")
# Proto type of each raw member a tracer writes, for a reader that wants to parse it.
RAW_TYPES = {
    "graph_def.pb": "tensorflow.GraphDef",
    "xspace.pb": "tensorflow.profiler.XSpace",
    "function_graphs.pb": "tensorflow.RunMetadata (function_graphs only)",
    "functions.json": "JSON: display name of each function graph, device_scope",
}
_RAW_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
# A member larger than this when unpacked is refused (a zip bomb, not a trace).
MAX_MEMBER_BYTES = 4 << 30
_SAVE_FIX = "Save the trace again with trace.save(path)."


def raw_type(name: str) -> str:
    """The proto type of a raw member, by its name."""
    if name.startswith("run_metadata"):
        return "tensorflow.RunMetadata"
    return RAW_TYPES.get(name, "bytes")


def save(trace: PlacementTrace, path: str | os.PathLike, *, overwrite: bool = True) -> str:
    """Write ``trace`` to ``path`` (a ``.tfplace`` file; see the module docstring); return the
    path. The file appears complete or not at all; a :class:`TraceWriteError` names the path
    when it cannot be written (a ``FileExistsError`` too when it exists and not ``overwrite``)."""
    from .. import __version__

    where = os.fspath(path)
    bad = [name for name in trace.raw if not _RAW_NAME.match(name)]
    if bad:
        raise ValueError(f"trace.raw names must be plain file names, not {bad[0]!r}.")
    members: dict[str, bytes] = {}
    for name in FRAMES:
        members[f"frames/{name}.json"] = _json(frame_to_json(getattr(trace, name), f"trace.{name}"))
    findings = trace.__dict__.get("_findings_cache")
    if findings is not None:
        members["frames/findings.json"] = _json(frame_to_json(findings, "trace.findings"))
    members["inputs.json"] = _json(trace.inputs)
    members["log.txt"] = trace.log.encode("utf-8", "surrogateescape")
    if trace.facts is not None:
        members["facts.json"] = _json(facts_to_json(trace.facts))
    for name, data in trace.raw.items():
        members[f"raw/{name}"] = bytes(data)
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

    write_atomically(where, "the trace", write, overwrite=overwrite)
    return where


def _json(value: Any, indent: int | None = None) -> bytes:
    return json.dumps(value, allow_nan=False, ensure_ascii=False, indent=indent).encode()


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


def load(path: str | os.PathLike) -> PlacementTrace:
    """The trace :func:`save` wrote to ``path``.

    A missing file is a ``TraceFileNotFound``; a file that is not a ``.tfplace`` archive, a
    damaged one, or one written by a newer version (``version`` above ``FORMAT_VERSION``) is a
    :class:`TraceError` naming the file and what to do.
    """
    import io

    from ..trace import PlacementTrace

    where = os.fspath(path)
    data = read_file(where, "trace file")
    if data[:4] != b"PK\x03\x04":
        raise TraceError(
            f"{where!r} is not a .tfplace file (not a zip archive). {_what_it_is(data)}"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise TraceError(f"{where!r} is a damaged .tfplace file ({exc}). {_SAVE_FIX}") from exc
    with archive:
        manifest = _read_json(archive, MANIFEST, where, hint="it is a zip, but not a .tfplace file")
        _check_manifest(manifest, where)
        try:
            info = manifest["trace"]
            frames = {
                name: frame_from_json(_read_json(archive, f"frames/{name}.json", where))
                for name in FRAMES
            }
            _add_cross_task(frames["transfers"])
            trace = PlacementTrace(
                **frames,
                devices=_strings(info["devices"], "devices"),
                inputs=_inputs(_read_json(archive, "inputs.json", where)),
                log=_read(archive, "log.txt", where).decode("utf-8", "surrogateescape"),
                source=_string(info["source"], "source"),
                truncated=_flag(info["truncated"], "truncated"),
                mode=_string(info["mode"], "mode"),
                mode_reason=_string(info.get("mode_reason", ""), "mode_reason"),
                notes=_strings(info["notes"], "notes"),
                predicted=_flag(info["predicted"], "predicted"),
            )
            names = set(archive.namelist())
            if "facts.json" in names:
                trace.facts = facts_from_json(_read_json(archive, "facts.json", where))
            if "frames/findings.json" in names and _written_here(manifest):
                # Another version's findings are found again (from facts.json, on first use):
                # the analyses change between versions, the placement they read does not.
                findings = frame_from_json(_read_json(archive, "frames/findings.json", where))
                trace.__dict__["_findings_cache"] = findings
            trace.raw = {
                name[len("raw/") :]: _read(archive, name, where)
                for name in archive.namelist()
                if name.startswith("raw/") and _RAW_NAME.match(name[len("raw/") :])
            }
        except TraceError:
            raise
        except (FrameFormatError, KeyError, TypeError, ValueError, IndexError) as exc:
            raise TraceError(f"{where!r} is a damaged .tfplace file: {exc}. {_SAVE_FIX}") from exc
    return trace


def _written_here(manifest: dict) -> bool:
    """Was the file written by this version of tfplace_widget?"""
    from .. import __version__

    return manifest.get("written_by") == f"tfplace_widget {__version__}"


def _add_cross_task(transfers: Any) -> None:
    """Files saved before issue 15 have no ``cross_task`` column: compute it (in place), so
    every loaded trace has the columns of a fresh one (a prediction's own columns stay)."""
    from ..frames import TRANSFERS_COLUMNS, cross_task

    if list(transfers.columns) == TRANSFERS_COLUMNS[:-1]:  # a measured trace's, from before
        transfers["cross_task"] = cross_task(transfers)


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
            f"is {manifest.get('format') if isinstance(manifest, dict) else None!r}). {_SAVE_FIX}"
        )
    version = manifest.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceError(f"{where!r} has an invalid format version {version!r}. {_SAVE_FIX}")
    if version > FORMAT_VERSION:
        from .. import __version__

        raise TraceError(
            f"{where!r} was written by a newer tfplace_widget ({manifest.get('written_by', '?')}, "
            f"trace format {version}); this one (tfplace_widget {__version__}) reads formats up "
            f"to {FORMAT_VERSION}. Upgrade: pip install -U tfplace_widget."
        )


def _read(archive: zipfile.ZipFile, name: str, where: str) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise TraceError(
            f"{where!r} is a damaged .tfplace file: it has no {name}. {_SAVE_FIX}"
        ) from None
    if info.file_size > MAX_MEMBER_BYTES:
        raise TraceError(
            f"{where!r}: {name} unpacks to {info.file_size} bytes, more than a trace holds; "
            "the file is not a trace this version wrote."
        )
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:  # CRC, truncation
        raise TraceError(
            f"{where!r} is a damaged .tfplace file ({name}: {exc}). {_SAVE_FIX}"
        ) from exc


def _read_json(archive: zipfile.ZipFile, name: str, where: str, hint: str = "") -> Any:
    if hint and name not in archive.namelist():
        raise TraceError(f"{where!r}: {hint} (it has no {name}). {_SAVE_FIX}")
    data = _read(archive, name, where)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise TraceError(
            f"{where!r} is a damaged .tfplace file ({name}: {exc}). {_SAVE_FIX}"
        ) from exc


def _string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} is not a list of strings")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} is not true or false")
    return value


def _inputs(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise ValueError("inputs.json is not an object")
    return {str(op): _strings(producers, f"inputs of {op!r}") for op, producers in value.items()}
