"""plotly's widget code sent to the browser once per kernel: the hidden ``PlotlyBundle`` holder.

Since plotly 6, ``go.FigureWidget`` is an anywidget whose ``_esm`` is plotly's whole widget
bundle (``plotly/package_data/widgetbundle.js``, about 5 MB), and anywidget puts ``_esm`` in the
state of every widget. Here the bundle travels once: ``PlotlyBundle``, one hidden widget per
kernel process, carries it gzip-compressed as a binary buffer (about 1.5 MB) with its sha256
``digest``. In the browser its ``initialize`` decompresses it (``DecompressionStream``), imports
it from a Blob URL and resolves a promise in a page-wide registry keyed by the digest; figures
(``plotly_bundle.CompactFigureWidget``) wait on that promise.

This module does not import plotly (about a second, most of it jsonschema's grammars pulled in
by ``plotly.io``), so ``%load_ext tfplace_widget`` can send the holder at once.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import anywidget
import traitlets
from ipywidgets.widgets.widget import _instances

# zlib level of the one-off compression (once per process, when the first figure is made).
# Measured on the 4.96 MB bundle of plotly 7.1 (2-core AMD EPYC, best of 3):
#   level 1: 1.75 MB in 45 ms, 4: 1.57 MB in 69 ms, 5: 1.52 MB in 94 ms, 6: 1.51 MB in
#   130 ms, 9: 1.51 MB in 176 ms.
# Above 5 the size shrinks by less than 1% for up to twice the time.
GZIP_LEVEL = 5
# How long a figure waits in the browser for the holder's code before it shows an error.
WAIT_S = 60
# The page-wide registry: globalThis[REGISTRY] is a Map from digest to a deferred module.
REGISTRY = "__tfplace_widget_plotly_bundles__"

# The JavaScript below names the registry, the digest and the wait as "$REGISTRY", "$DIGEST" and
# "$WAIT_MS"; _js() puts the JSON values in.
_ENTRY_JS = """
function bundleEntry(digest) {
  const bundles = (globalThis[$REGISTRY] ??= new Map());
  let entry = bundles.get(digest);
  if (entry === undefined) {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    promise.catch(() => {});  // a failed load is reported by the figures that wait on it
    entry = { promise, resolve, reject, loading: false };
    bundles.set(digest, entry);
  }
  return entry;
}
"""

# The holder: no view, only ``initialize``, which starts the load and returns at once (anywidget
# gives a model 2 s to initialize; the figures wait on the registry instead).
_HOLDER_ESM = (
    _ENTRY_JS
    + """
async function importBundle(gzipped) {
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser has no DecompressionStream (Chrome 80, Firefox 113, Safari 16.4)");
  }
  const stream = new Blob([gzipped]).stream().pipeThrough(new DecompressionStream("gzip"));
  const code = await new Response(stream).blob();
  const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
  try {
    return await import(url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

export default {
  initialize({ model }) {
    const digest = model.get("digest");
    const entry = bundleEntry(digest);
    if (entry.loading) return;  // this page has (or is importing) this bundle already
    entry.loading = true;
    importBundle(model.get("bundle_gz")).then(entry.resolve, (error) => {
      // Forget the failed entry: a new holder (re-run after a kernel restart) may try again.
      const bundles = globalThis[$REGISTRY];
      if (bundles.get(digest) === entry) bundles.delete(digest);
      entry.reject(new Error(`tfplace_widget: could not load plotly's widget code: ${error}`));
    });
  },
};
"""
)


def _js(template: str, **values: object) -> str:
    """``template`` with each ``$NAME`` replaced by the JSON of ``values[name.lower()]``."""
    values = {"registry": REGISTRY, **values}
    for name, value in values.items():
        template = template.replace(f"${name.upper()}", json.dumps(value))
    return template


@dataclass(frozen=True)
class Bundle:
    """plotly's widget bundle as the holder sends it."""

    digest: str  # sha256 of the uncompressed bundle: the registry key in the browser
    gzipped: bytes
    size: int  # uncompressed bytes


def bundle_path() -> Path:
    """Where plotly keeps its widget bundle (as ``BaseFigureWidget._esm`` names it), found
    without importing plotly (about a second: plotly.io pulls in nbformat and jsonschema)."""
    spec = importlib.util.find_spec("plotly")
    folders = list(spec.submodule_search_locations or []) if spec else []
    folder = Path(folders[0]) if folders else Path("plotly-is-not-installed")
    return folder / "package_data" / "widgetbundle.js"


def bundle_available() -> bool:
    """True when plotly ships its anywidget bundle (plotly >= 6)."""
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
    """The one widget per kernel that carries plotly's widget code; never displayed.

    Get it with ``holder()``, which makes it on first use (and again if something closed it,
    e.g. ``Widget.close_all()``).
    """

    _esm = _js(_HOLDER_ESM)
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
            # Figures still open point at the new one: a closed widget cannot be serialized
            # (a page reload asks every open figure for its whole state).
            for widget in list(_instances.values()):
                if getattr(type(widget), "_waits_for_plotly_bundle", False):
                    widget._plotly_bundle = _holder
        return _holder
