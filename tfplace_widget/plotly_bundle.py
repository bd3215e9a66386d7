"""plotly figures whose widget code comes from the kernel's one ``PlotlyBundle`` holder.

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

import anywidget
import plotly.graph_objects as go
import traitlets
from ipywidgets import widget_serialization

from .bundle_holder import (  # noqa: F401  (re-exported: the holder's public names)
    _ENTRY_JS,
    GZIP_LEVEL,
    REGISTRY,
    WAIT_S,
    Bundle,
    PlotlyBundle,
    _js,
    bundle,
    bundle_available,
    bundle_path,
    holder,
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


def compact() -> bool:
    """True when plotly's FigureWidget is an anywidget with the bundle file (plotly >= 6)."""
    return issubclass(go.FigureWidget, anywidget.AnyWidget) and bundle_available()


class CompactFigureWidget(go.FigureWidget):
    """A ``go.FigureWidget`` whose ``_esm`` is a ~1 KB stub instead of plotly's 5 MB bundle.

    Same Python API and same drawing; making one first makes sure the kernel's ``PlotlyBundle``
    is open, so its comm_open reaches the browser before the figure's. With plotly < 6 (no
    anywidget bundle) it is a plain ``go.FigureWidget``.
    """

    _waits_for_plotly_bundle = True  # bundle_holder.holder() re-points such figures
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
