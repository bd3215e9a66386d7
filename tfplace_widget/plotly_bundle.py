"""plotly's widget code sent to the browser once per kernel, gzip-compressed, not once per figure.

Since plotly 6, ``go.FigureWidget`` is an anywidget whose ``_esm`` is plotly's whole widget
bundle (``plotly/package_data/widgetbundle.js``, about 5 MB). anywidget puts ``_esm`` in the
state of every widget, so every figure (one per panel) sends those 5 MB again, as JSON text.

Here the bundle travels once: ``PlotlyBundle``, one hidden widget per kernel process, carries it
gzip-compressed as a binary buffer (about 1.5 MB) with its sha256 ``digest``. In the browser
its ``initialize`` decompresses it (``DecompressionStream``), imports it from a Blob URL and
resolves a promise in a page-wide registry keyed by the digest. ``CompactFigureWidget`` is a
``go.FigureWidget`` whose ``_esm`` is a stub of about 1 KB that waits on that promise and
re-exports plotly's module, so plotly draws exactly as before. The figure also points at the
holder in a synced trait, so anything that collects a figure's dependencies (ipywidgets'
``embed``) takes the holder along, and its whole state (what a reloaded page asks for) is the
figure as it is now, not the empty one plotly would report for a figure inside a panel.

The figure's code waits for the holder for ``WAIT_S`` and then shows an error. anywidget itself
gives a model 2 s to load its module before it drops that model's later messages, so on a very
slow page the first figure may draw but miss updates; plotly's own 5 MB module has the same 2 s.

Keys by digest: two kernels with different plotly versions in one page each get their own.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import anywidget
import plotly.basewidget
import plotly.graph_objects as go
import traitlets
from ipywidgets import widget_serialization
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

# A figure's whole ``_esm``: wait for the holder's module (top-level await), re-export it.
_FIGURE_ESM = (
    _ENTRY_JS
    + """
const DIGEST = $DIGEST;
const WAIT_MS = $WAIT_MS;
let timer;
const late = new Promise((_, reject) => {
  timer = setTimeout(() => reject(new Error(
    `tfplace_widget: plotly's widget code did not arrive within ${WAIT_MS / 1000} s. It is ` +
    "sent once per kernel by a hidden PlotlyBundle widget, whose model this page never " +
    "received: re-run the cell, and look for errors in the browser console.")), WAIT_MS);
});
let plotly;
try {
  plotly = await Promise.race([bundleEntry(DIGEST).promise, late]);
} finally {
  clearTimeout(timer);
}
export default plotly.default;
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
    """Where plotly keeps its widget bundle (as ``BaseFigureWidget._esm`` names it)."""
    return Path(plotly.basewidget.__file__).parent / "package_data" / "widgetbundle.js"


@functools.cache
def bundle() -> Bundle:
    """The bundle read, hashed and compressed once per process (about 0.1 s, see GZIP_LEVEL)."""
    code = bundle_path().read_bytes()
    return Bundle(
        digest=hashlib.sha256(code).hexdigest(),
        gzipped=gzip.compress(code, compresslevel=GZIP_LEVEL, mtime=0),
        size=len(code),
    )


def compact() -> bool:
    """True when plotly's FigureWidget is an anywidget with the bundle file (plotly >= 6)."""
    return issubclass(go.FigureWidget, anywidget.AnyWidget) and bundle_path().is_file()


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
                if isinstance(widget, CompactFigureWidget):
                    widget._plotly_bundle = _holder
        return _holder


class CompactFigureWidget(go.FigureWidget):
    """A ``go.FigureWidget`` whose ``_esm`` is a ~1 KB stub instead of plotly's 5 MB bundle.

    Same Python API and same drawing; making one first makes sure the kernel's ``PlotlyBundle``
    is open, so its comm_open reaches the browser before the figure's. With plotly < 6 (no
    anywidget bundle) it is a plain ``go.FigureWidget``.
    """

    # Points at the holder: keeps it in the figure's dependencies (ipywidgets.embed) and says
    # in the figure's state where its code comes from.
    _plotly_bundle = traitlets.Instance(PlotlyBundle, allow_none=True).tag(
        sync=True, **widget_serialization
    )

    @property
    def _esm(self) -> str:  # read once, by AnyWidget.__init__, which makes it a synced trait
        if not compact():
            return str(go.FigureWidget._esm)
        return _js(_FIGURE_ESM, digest=bundle().digest, wait_ms=WAIT_S * 1000)

    @traitlets.default("_plotly_bundle")
    def _default_plotly_bundle(self) -> PlotlyBundle | None:
        return holder() if compact() else None

    _built = False  # True once plotly's constructor has run (it opens the comm half-way)

    def __init__(self, *args: object, **kwargs: object) -> None:
        if compact():
            holder()  # first: its comm_open must reach the browser before this figure's
        super().__init__(*args, **kwargs)
        self._built = True

    def get_state(self, key: object = None, drop_defaults: bool = False) -> dict:
        """The synced state; the whole of it (``key=None``) with the figure as it is now.

        plotly sends later traces and layout changes as one-off messages and refreshes its
        ``_widget_data``/``_widget_layout`` traits only when the figure itself is displayed,
        which a figure inside a panel never is. So the whole state, which a browser asks for
        when the page is reloaded, would describe the empty figure of construction time and
        plotly would draw no bars. Updates (``key`` given) are left alone.
        """
        state = super().get_state(key, drop_defaults)
        if key is None and self._built:
            for name, value in (
                ("_widget_data", self._data),
                ("_widget_layout", self._layout_obj._props),
            ):
                to_json = self.trait_metadata(name, "to_json", self._trait_to_json)
                state[name] = to_json(value, self)
        return state
