"""Moved to :mod:`tfplace_widget.tfadapter.capture`; this import path stays for code and notebooks that use it."""

from .tfadapter.capture import (  # noqa: F401
    CRASH_TAIL_BYTES,
    CapturedText,
    capture_native_output,
    import_tensorflow,
)

__all__ = ["CRASH_TAIL_BYTES", "CapturedText", "capture_native_output", "import_tensorflow"]
