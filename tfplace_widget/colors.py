"""One colour per device, the same in every panel of a notebook.

Colours come from the device's type and index, not from the order devices were met, so
``CPU:1`` has the same colour in every panel and every session. The palette is Okabe-Ito
(colour-blind safe) and reads on JupyterLab's light and dark themes.
"""

from __future__ import annotations

from .devices import parse_device

# Okabe-Ito, minus black; each type walks the palette from its own start.
_PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442"]
_TYPE_START = {"CPU": 0, "GPU": 2, "TPU": 3}
_UNKNOWN = "#999999"


def device_color(device: str) -> str:
    """Hex colour for a device name in any spelling (``/gpu:0``, ``/device:CPU:1``...)."""
    try:
        spec = parse_device(device)
    except ValueError:
        return _UNKNOWN
    if spec.type is None:
        return _UNKNOWN
    start = _TYPE_START.get(spec.type, 5)
    slot = start + (spec.index or 0) + 3 * (spec.task or 0)
    return _PALETTE[slot % len(_PALETTE)]


def text_color_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (WCAG relative luminance)."""
    r, g, b = (int(background[i : i + 2], 16) / 255 for i in (1, 3, 5))

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    luminance = 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
    return "#000000" if luminance > 0.35 else "#ffffff"


def color_class(color: str) -> str:
    """CSS class that paints a device chip in ``color`` (see :func:`chip_css`)."""
    return f"tfplace-color-{color.lstrip('#').lower()}"


def chip_css() -> str:
    """Style rules for device chips, one class per palette colour (ToggleButtons have no
    background-colour style trait in ipywidgets 8)."""
    rules = []
    for color in [*_PALETTE, _UNKNOWN]:
        rules.append(
            f".{color_class(color)}.jupyter-button {{ background-color: {color}; "
            f"color: {text_color_on(color)}; }}"
        )
    rules.append(
        ".tfplace-chip.jupyter-button { border-radius: 12px; padding: 0 12px; opacity: 0.92; }"
        ".tfplace-chip.jupyter-button.mod-active { opacity: 1; font-weight: 700;"
        " box-shadow: 0 0 0 3px var(--jp-ui-font-color1, #222); }"
    )
    return "\n".join(rules)
