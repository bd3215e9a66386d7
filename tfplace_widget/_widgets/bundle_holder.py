"""plotly.js sent to the browser once per kernel: the hidden ``PlotlyBundle`` holder.

The timeline draws with plotly.js (``plotly/package_data/plotly.min.js``, about 5 MB, the file
plotly's own HTML export embeds). Sending it in the state of every timeline would repeat those
5 MB per panel, so ``PlotlyBundle``, one hidden widget per kernel process, carries it
gzip-compressed as a binary buffer (about 1.5 MB) with its sha256 ``digest``. In the browser its
``initialize`` offers the bundle to a page-wide registry keyed by the digest; when the first
timeline (``timeline.TimelineWidget``) wants it, or the page has been quiet 3 s since the offer
(so that the page's first timeline does not wait for it), the registry decompresses it
(``DecompressionStream``), imports it from a Blob URL (wrapped as an ES module that leaves
``window.Plotly`` as it was) and resolves the promise the timelines wait on. Not at the offer
itself: evaluating plotly.js holds the main thread for a second or more, and anywidget gives
each model 2 s to load its module, after which that model drops its kernel's messages (a
reload restoring many widgets at once lost some). The registry is per frame (``globalThis``): a timeline whose
frame has no bundle 2 s after it renders asks its own kernel for it and imports it with the
same code (``_static/bundle_entry.js``), once per frame, whichever of the two comes first.

This module does not import plotly's Python package: ``plotly.basewidget`` alone pulls in
``plotly.io`` -> nbformat -> jsonschema's grammars (over a second), which the package never needs.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import threading
from dataclasses import dataclass

import anywidget
import traitlets
from ipywidgets.widgets.widget import _instances

from .. import _static as static
from .._rendering.plotly_js import plotly_js_path

# zlib level of the one-off compression (once per process, when the holder is first made).
# Measured on plotly.js 4.1.1's 4.82 MB plotly.min.js (2-core Xeon, best of 3):
#   level 1: 1.71 MB in 41 ms, 4: 1.53 MB in 60 ms, 5: 1.48 MB in 80 ms, 6: 1.47 MB in
#   107 ms, 9: 1.47 MB in 143 ms.
# Above 5 the size shrinks by less than 1% for up to twice the time.
GZIP_LEVEL = 5
# How long a timeline waits in the browser for plotly.js (the holder's, or the one it asked its
# kernel for after 2 s: _static/timeline.js, ASK_KERNEL_MS) before it shows an error.
WAIT_S = 60
# The page-wide registry: globalThis[REGISTRY] is a Map from digest to a deferred module.
REGISTRY = "__tfplace_widget_plotly_bundles__"

# The JavaScript (_static/bundle_entry.js, holder.js and timeline.js) names the registry, the
# digest and the wait as "$REGISTRY", "$DIGEST" and "$WAIT_MS"; fill_js() puts the JSON values in.
ENTRY_JS = static.text("bundle_entry.js")  # bundleEntry(digest): the registry's entry

# The holder: no view, only ``initialize``, which offers the bundle and returns at once (anywidget
# gives a model 2 s to initialize; the timelines wait on the registry instead). bundle_entry.js
# holds the import itself, which a timeline given the bundle by its kernel runs too.
_HOLDER_ESM = ENTRY_JS + "\n" + static.text("holder.js")


def fill_js(template: str, **values: object) -> str:
    """``template`` with each ``$NAME`` replaced by the JSON of ``values[name.lower()]``."""
    values = {"registry": REGISTRY, **values}
    for name, value in values.items():
        template = template.replace(f"${name.upper()}", json.dumps(value))
    return template


@dataclass(frozen=True)
class Bundle:
    """plotly.js as the holder sends it."""

    digest: str  # sha256 of the uncompressed file: the registry key in the browser
    gzipped: bytes
    size: int  # uncompressed bytes


bundle_path = plotly_js_path  # the file the holder sends


def bundle_available() -> bool:
    """True when plotly's package has its plotly.js file."""
    return bundle_path().is_file()


@functools.cache
def bundle() -> Bundle:
    """The bundle read, hashed and compressed once per process (about 0.1 s, see GZIP_LEVEL)."""
    code = bundle_path().read_bytes()
    return Bundle(
        digest=hashlib.sha256(code).hexdigest(),
        gzipped=gzip.compress(code, compresslevel=GZIP_LEVEL, mtime=0),
        size=len(code),
    )


class PlotlyBundle(anywidget.AnyWidget):
    """The one widget per kernel that carries plotly.js; never displayed.

    Get it with ``holder()``, which makes it on first use (and again if something closed it,
    e.g. ``Widget.close_all()``).
    """

    _esm = fill_js(_HOLDER_ESM)
    bundle_gz = traitlets.Bytes(b"").tag(sync=True)  # bytes: sent as a binary buffer
    digest = traitlets.Unicode("").tag(sync=True)


_lock = threading.Lock()
_holder: PlotlyBundle | None = None


def holder() -> PlotlyBundle:
    """The kernel's ``PlotlyBundle``, opened now if there is none (or it was closed)."""
    global _holder
    with _lock:
        if _holder is None or _holder.comm is None:
            code = bundle()
            _holder = PlotlyBundle(bundle_gz=code.gzipped, digest=code.digest)
            # Timelines still open point at the new one: a closed widget cannot be serialized
            # (a page reload asks every open widget for its whole state).
            for widget in list(_instances.values()):
                if getattr(type(widget), "_waits_for_plotly_bundle", False):
                    widget._plotly_bundle = _holder
        return _holder
