"""One colour per device: no two devices share one, and a device keeps its colour in every panel.

Every device gets a colour of its own, never handed to another device in the same kernel, so
devices that share a panel never share a colour. The devices of one machine that panels show
most (``CPU:0``-``CPU:3``, ``GPU:0``-``GPU:7``, ``TPU:0``-``TPU:3`` of the local task) have fixed
colours, the same in every panel, session and notebook: the colour-blind-safe Okabe-Ito palette
(minus black) for the first seven, then Paul Tol's "muted" palette. Any other device (more
CPUs or GPUs, other tasks or jobs, other device types) gets the next colour of a fixed sequence
the first time the kernel sees it, and keeps it for the kernel's life. Colours read on
JupyterLab's light and dark themes; text on a colour is black or white by WCAG contrast.
"""

from __future__ import annotations

import colorsys
import functools
import threading
from collections.abc import Iterable

from .. import static
from ..model.devices import parse_device

# (colour, the local device it is fixed for), in order.
_FIXED = [
    ("#0072B2", "CPU:0"),  # Okabe-Ito blue
    ("#E69F00", "CPU:1"),  # orange
    ("#009E73", "GPU:0"),  # bluish green
    ("#CC79A7", "GPU:1"),  # reddish purple
    ("#56B4E9", "GPU:2"),  # sky blue
    ("#D55E00", "GPU:3"),  # vermillion
    ("#F0E442", "GPU:4"),  # yellow
    ("#CC6677", "CPU:2"),  # Tol muted rose
    ("#44AA99", "CPU:3"),  # teal
    ("#882255", "GPU:5"),  # wine
    ("#999933", "GPU:6"),  # olive
    ("#332288", "GPU:7"),  # indigo
    ("#DDCC77", "TPU:0"),  # sand
    ("#88CCEE", "TPU:1"),  # cyan
    ("#117733", "TPU:2"),  # green
    ("#AA4499", "TPU:3"),  # purple
]
_PALETTE = [color for color, _ in _FIXED]
_UNKNOWN = "#999999"  # not a device (unparseable, or no device type): grey
# Colours the op table's style sheet has chip rules for from the start; a panel showing a
# device beyond them adds the rules it needs (OpTable.cover_colors).
CSS_COLORS = 32
_CHIP_CSS = static.text("chips.css")  # the chips' shape, and the chip that is on

_LOCAL = ("localhost", 0, 0)
_lock = threading.Lock()
# device key (job, replica, task, type, index) -> its slot in the colour sequence
_slot_of: dict[tuple, int] = {
    (*_LOCAL, device.split(":")[0], int(device.split(":")[1])): slot
    for slot, (_, device) in enumerate(_FIXED)
}
_sequence: list[str] = list(_PALETTE)


def device_color(device: str) -> str:
    """Hex colour for a device name in any spelling (``/gpu:0``, ``/device:CPU:1``...).

    Two different devices never get the same colour; a name that is not a device (``""``,
    ``"garbage"``) is grey.
    """
    return _color_of_name(device)


@functools.lru_cache(maxsize=4096)  # a name's colour never changes once given
def _color_of_name(device: str) -> str:
    try:
        spec = parse_device(device)
    except ValueError:
        return _UNKNOWN
    if spec.type is None:
        return _UNKNOWN
    key = (
        spec.job or _LOCAL[0],
        spec.replica or 0,
        spec.task or 0,
        spec.type,
        spec.index or 0,
    )
    with _lock:
        slot = _slot_of.get(key)
        if slot is None:
            slot = _slot_of[key] = len(_slot_of)
        return _color_at(slot)


def _color_at(slot: int) -> str:
    """The ``slot``-th colour of the sequence: the palette, then generated colours (callers
    hold ``_lock``, or call before any other thread can)."""
    while len(_sequence) <= slot:
        _sequence.append(_next_generated(len(_sequence)))
    return _sequence[slot]


def _next_generated(n: int) -> str:
    """A colour for slot ``n`` past the palette, different from every earlier one: hues a
    golden angle apart, at two saturations and three lightnesses that read on both themes."""
    taken = set(_sequence)
    k = n - len(_PALETTE)
    while True:
        hue = (0.09 + k * 0.618033988749895) % 1.0
        lightness = (0.50, 0.62, 0.40)[k % 3]
        saturation = (0.70, 0.50)[(k // 3) % 2]
        r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
        color = "#{:02X}{:02X}{:02X}".format(*(round(c * 255) for c in (r, g, b)))
        if color not in taken and color != _UNKNOWN:
            return color
        k += 1_000_003  # a rounding clash: step to a hue far along the sequence


def css_colors() -> list[str]:
    """Every colour a device has (or the first ``CSS_COLORS`` will have), and the grey."""
    with _lock:
        _color_at(CSS_COLORS - 1)
        return [*_sequence[: max(CSS_COLORS, len(_slot_of))], _UNKNOWN]


def _relative_luminance(color: str) -> float:
    """WCAG 2 relative luminance of ``#RRGGBB``."""
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2 contrast ratio of two ``#RRGGBB`` colours, from 1 (same) to 21 (black/white)."""
    a, b = sorted((_relative_luminance(first), _relative_luminance(second)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def text_color_on(background: str) -> str:
    """Black or white, whichever has the higher WCAG contrast ratio on ``background``."""
    black, white = "#000000", "#ffffff"
    return black if contrast_ratio(background, black) > contrast_ratio(background, white) else white


def color_class(color: str) -> str:
    """CSS class that paints a device chip in ``color`` (see :func:`chip_css`)."""
    return f"tfplace-color-{color.lstrip('#').lower()}"


def chip_rules(colors: Iterable[str]) -> str:
    """One style rule per colour: a chip with its class gets it as background."""
    return "\n".join(
        f".{color_class(color)}.jupyter-button {{ background-color: {color}; "
        f"color: {text_color_on(color)}; }}"
        for color in dict.fromkeys(colors)
    )


def chip_css() -> str:
    """Style rules for device chips, one class per colour (ToggleButtons have no
    background-colour style trait in ipywidgets 8)."""
    return chip_rules(css_colors()) + "\n" + _CHIP_CSS
