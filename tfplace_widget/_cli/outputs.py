"""What the commands write, checked before any work: a file is never replaced without
``--force``, and its name must end in its format's suffix (``.tfplace``, ``.html``,
``.json``/``.json.gz``), since tfplace and browsers open a file by its name."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import CliError, one_line

if TYPE_CHECKING:  # pragma: no cover
    from .._model.trace import PlacementTrace


@dataclass(frozen=True)
class OutputFormat:
    """What an output holds and the suffixes (any case) tfplace reads it back by."""

    what: str
    suffixes: tuple[str, ...]
    why: str  # why the name matters


SAVED_TRACE = OutputFormat("the trace", (".tfplace",), "tfplace reads a file by its name")
HTML_REPORT = OutputFormat("the HTML report", (".html", ".htm"), "a browser opens it by its name")
CHROME_TRACE = OutputFormat(
    "the Chrome trace", (".json", ".json.gz"), "tfplace reads it by its name; .gz is gzipped"
)


def check_output(option: str, path: str, kind: OutputFormat, force: bool) -> None:
    """Refuse an output before any work: a folder, a missing folder, no permission, a name
    without its format's suffix, or (without ``--force``) a file that exists."""
    from .._export.output import write_error

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CliError(
            str(write_error(kind.what, path, IsADirectoryError(errno.EISDIR, "Is a directory")))
        )
    if not os.path.isdir(folder):
        missing = FileNotFoundError(errno.ENOENT, "No such file or directory")
        raise CliError(str(write_error(kind.what, path, missing)))
    if not path.lower().endswith(kind.suffixes):
        stem = path[:-3] if path.lower().endswith(".gz") else path
        better = os.path.splitext(stem)[0] + kind.suffixes[0]
        raise CliError(
            f"{option} {path!r}: {kind.what} is a {' or '.join(kind.suffixes)} file "
            f"({kind.why}); name it {better!r}."
        )
    if os.path.lexists(path) and not force:
        raise CliError(_exists(option, path))
    if not os.access(folder, os.W_OK):
        denied = PermissionError(errno.EACCES, "Permission denied")
        raise CliError(str(write_error(kind.what, path, denied)))


def check_tables_output(option: str, folder: str, kind: str, force: bool) -> None:
    """Refuse a tables folder that is a file or (without ``--force``) holds a table file."""
    from .._export.tables import TABLES, XLA_TABLE, table_paths

    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CliError(
            f"Cannot write {kind} tables to {folder!r}: it is a file, not a folder. Pass a "
            "folder path (it is created if missing)."
        )
    suffix = ".csv" if kind == "CSV" else ".parquet"
    taken = [
        os.path.basename(p)
        for p in table_paths(folder, suffix, (*TABLES, XLA_TABLE)).values()
        if os.path.lexists(p)
    ]
    if taken and not force:
        raise CliError(
            f"{option} {folder!r} already holds {', '.join(taken)}: pass --force to replace "
            f"{'them' if len(taken) > 1 else 'it'}, or pick another folder. Nothing was written."
        )


def _exists(option: str, path: str) -> str:
    return (
        f"{option} {path!r} already exists: pass --force to replace it, or pick another name. "
        "Nothing was written."
    )


@contextlib.contextmanager
def refusing_to_overwrite(option: str, path: str) -> Iterator[None]:
    """A file made at ``path`` after :func:`check_output` (by another process) is kept: the
    writer's ``FileExistsError`` becomes the message ``--force`` answers."""
    try:
        yield
    except FileExistsError as exc:
        raise CliError(_exists(option, getattr(exc, "filename", None) or path)) from exc


def save_run(trace: PlacementTrace, path: str, force: bool) -> str:
    """Save the trace ``tfplace run`` made. A file that appeared at ``path`` while it ran is
    kept, and the trace (maybe minutes of work) goes to a new name beside it, then an error."""
    from .._export.output import write_new_file

    try:
        return trace.save(path, overwrite=force)
    except FileExistsError:
        base, suffix = os.path.splitext(path)
        saved = write_new_file(base, suffix, lambda p: trace.save(p, overwrite=False))
        raise CliError(
            f"-o {path!r} appeared while the trace ran and is kept (--force replaces it); "
            f"the trace was saved to {saved!r} instead."
        ) from None


def html_writer() -> Callable[..., Any]:
    """``tfplace_widget._export.html.write_html``, or a clear error when this version has none."""
    try:
        from .._export.html import write_html
    except ModuleNotFoundError as exc:
        if exc.name not in (
            "tfplace_widget._export.html",
            __package__.rpartition(".")[0] + ".export.html",
        ):
            raise
        raise CliError(
            "--html needs the HTML report (tfplace_widget._export.html), which this version of "
            "tfplace_widget does not have yet; leave out --html, or export with tfplace export."
        ) from exc
    except ImportError as exc:
        raise CliError(f"--html: the HTML report cannot be loaded: {one_line(exc, True)}") from exc
    return write_html


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        from .._export.tables import PARQUET_FIX

        raise CliError(PARQUET_FIX.replace("to_parquet", "--parquet", 1)) from exc
