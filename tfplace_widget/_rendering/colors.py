"""One colour per device: no two devices share one, and a device keeps its colour in every panel.

Every device gets a colour of its own, never handed to another device in the same kernel, so
devices that share a panel never share a colour. The devices of one machine that panels show
most (``CPU:0``-``CPU:3``, ``GPU:0``-``GPU:7``, ``TPU:0``-``TPU:3`` of the local task) have fixed
colours, the same in every panel, session and notebook: the colour-blind-safe Okabe-Ito palette
(minus black) for the first seven, then nine picked to stay apart from them and from each other
under simulated protanopia, deuteranopia and tritanopia (Machado et al. 2009): the twelve of a
4-CPU, 8-GPU machine, and the eight of a 4-CPU, 4-TPU one, are at least 10 CIEDE2000 apart in
normal vision and in each simulation (``tests/rendering/test_colors.py`` checks it). Any other device
(more CPUs or GPUs, other tasks or jobs, other device types) gets the next colour of a fixed
sequence the first time the kernel sees it, and keeps it for the kernel's life.

Text on a colour (a chip) is black or white by WCAG contrast, which is then at least 4.5:1.
Text *in* a device's colour (the table's device column, the picked op's device) is drawn in its
ink (:func:`ink_colors`): the colour darkened for light themes and lightened for dark ones until
it is at WCAG AA contrast (4.5:1) on the backgrounds it sits on.
"""

from __future__ import annotations

import colorsys
import functools
import threading
from collections.abc import Iterable

from .. import _static as static
from .._model.devices import parse_device

# (colour, the local device it is fixed for), in order.
_FIXED = [
    ("#0072B2", "CPU:0"),  # Okabe-Ito blue
    ("#E69F00", "CPU:1"),  # orange
    ("#009E73", "GPU:0"),  # bluish green
    ("#CC79A7", "GPU:1"),  # reddish purple
    ("#56B4E9", "GPU:2"),  # sky blue
    ("#D55E00", "GPU:3"),  # vermillion
    ("#F0E442", "GPU:4"),  # yellow
    ("#A5694B", "CPU:2"),  # brown      (these nine: picked apart from the ones above and from
    ("#A5C387", "CPU:3"),  # sage        each other under simulated colour blindness, see
    ("#8778FF", "GPU:5"),  # periwinkle  the module docstring)
    ("#B42D00", "GPU:6"),  # brick
    ("#B41E87", "GPU:7"),  # magenta
    ("#5A96D2", "TPU:0"),  # steel blue
    ("#C31E69", "TPU:1"),  # crimson
    ("#F05A87", "TPU:2"),  # pink
    ("#00D2E1", "TPU:3"),  # cyan
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
_taken: set[str] = {*_PALETTE, _UNKNOWN}  # every colour of _sequence, and the grey


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
        color = _next_generated(len(_sequence))
        _sequence.append(color)
        _taken.add(color)
    return _sequence[slot]


_COLORS = 1 << 24
_STEP = 0x9E3779  # odd, so that stepping by it visits every one of the 2**24 colours


def _next_generated(n: int) -> str:
    """A colour for slot ``n`` past the palette, different from every earlier one: hues a
    golden angle apart, at two saturations and three lightnesses that read on both themes;
    where that colour is taken (rounding makes clashes, thousands of devices in), the next
    free one stepping through all 2**24 colours from it, so the search always ends."""
    k = n - len(_PALETTE)
    hue = (0.09 + k * 0.618033988749895) % 1.0
    lightness = (0.50, 0.62, 0.40)[k % 3]
    saturation = (0.70, 0.50)[(k // 3) % 2]
    r, g, b = colorsys.hls_to_rgb(hue, lightness, saturation)
    value = (round(r * 255) << 16) | (round(g * 255) << 8) | round(b * 255)
    if len(_taken) >= _COLORS:  # 16 million devices: none left to give (never in a trace)
        return _UNKNOWN
    while (color := f"#{value:06X}") in _taken:
        value = (value + _STEP) % _COLORS
    return color


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


# sRGB channel value (0-255) -> linear light, as _relative_luminance computes it.
_LINEAR = [_relative_luminance(f"#{v:02X}0000") / 0.2126 for v in range(256)]


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


# The backgrounds device-colour text sits on: JupyterLab's light and dark themes'
# --jp-layout-color1 and --jp-layout-color2 (a hovered row), and the HTML report's own.
LIGHT_BACKGROUNDS = ("#ffffff", "#eeeeee", "#f3f3f3")
DARK_BACKGROUNDS = ("#111111", "#212121", "#222222", "#2a2a2a", "#424242")
AA_TEXT = 4.5  # WCAG 2 AA, normal-size text


@functools.lru_cache(maxsize=4096)
def ink_colors(color: str) -> tuple[str, str]:
    """``(light, dark)``: ``color`` as text on light themes and on dark ones, at WCAG AA
    contrast on each of their backgrounds (``LIGHT_BACKGROUNDS``, ``DARK_BACKGROUNDS``): the
    colour as it is when it reads, else mixed with as little black (or white) as it takes."""
    return _mixed_until_readable(color, "#000000", LIGHT_BACKGROUNDS), _mixed_until_readable(
        color, "#ffffff", DARK_BACKGROUNDS
    )


def _mixed_until_readable(color: str, toward: str, backgrounds: Iterable[str]) -> str:
    # Each background's luminance once; the contrast of two colours is (max + 0.05) /
    # (min + 0.05) of their luminances (``contrast_ratio``, without parsing hex per step).
    lit = [_relative_luminance(bg) + 0.05 for bg in backgrounds]
    start = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    end = [int(toward[i : i + 2], 16) for i in (1, 3, 5)]

    def mixed(step: int) -> tuple[int, ...]:
        t = step / 100
        return tuple(round(a + (z - a) * t) for a, z in zip(start, end, strict=True))

    def readable(step: int) -> bool:
        r, g, b = mixed(step)
        own = 0.2126 * _LINEAR[r] + 0.7152 * _LINEAR[g] + 0.0722 * _LINEAR[b] + 0.05
        return all(max(own, bg) / min(own, bg) >= AA_TEXT for bg in lit)

    # The first of the 101 steps that reads. Each step moves every channel toward black (or
    # white), so contrast with the backgrounds, once it is on their far side, only grows:
    # unreadable, then readable from one step on, found by halving.
    low, high = 0, 100
    if not readable(high):  # pragma: no cover - black and white pass on every background
        return toward.upper()
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if readable(middle) else (middle + 1, high)
    return "#{:02X}{:02X}{:02X}".format(*mixed(low))


def ink_style(color: str) -> str:
    """The inline style of an element whose text is in a device's ``color``: its inks as the
    ``--tfplace-ink-light``/``--tfplace-ink-dark`` variables that the ``tfplace-ink`` class
    (``table.css``) picks from by theme, and the light one as plain ``color`` for a page
    without that sheet."""
    light, dark = ink_colors(color)
    return f"color:{light};--tfplace-ink-light:{light};--tfplace-ink-dark:{dark}"
