"""``paused_gc``: build many small objects without the cyclic collector's repeated full passes."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small acyclic objects.

    With TensorFlow imported the heap holds about a million tracked objects, and the lists and
    dicts of a 100k-op trace set off several full collections (about half a second each) that
    free nothing. On exit the collector is restored and, if it was on, the young generation
    (only what the block allocated) is collected at once, so that cost is paid here.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            gc.collect(0)
