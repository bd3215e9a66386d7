"""Moved to :mod:`tfplace_widget.model.errors`; this import path stays for code and notebooks that use it."""

from .model.errors import (  # noqa: F401
    LOG_LINES_IN_MESSAGE,
    TraceError,
    TraceFileNotFound,
    attach_log,
    ran_out_message,
    read_file,
)

__all__ = [
    "LOG_LINES_IN_MESSAGE",
    "TraceError",
    "TraceFileNotFound",
    "attach_log",
    "ran_out_message",
    "read_file",
]
