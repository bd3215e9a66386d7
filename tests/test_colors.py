"""Device colours: devices that share a panel never share a colour, a device keeps its colour
in every panel, and text on a colour is the more readable of black and white (WCAG 2).

Pure Python: no TensorFlow, no widgets.
"""

from __future__ import annotations

import re

from tfplace_widget.rendering.colors import (
    _PALETTE,
    _UNKNOWN,
    chip_css,
    device_color,
    text_color_on,
)

LOCAL = "/job:localhost/replica:0/task:0/device:{}"


def _luminance(color: str) -> float:
    """WCAG 2 relative luminance, written out here rather than taken from colors.py."""
    channels = []
    for i in (1, 3, 5):
        c = int(color[i : i + 2], 16) / 255
        channels.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    r, g, b = channels
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def _assert_distinct(devices: list[str]) -> None:
    colors = {device: device_color(device) for device in devices}
    shared = {}
    for device, color in colors.items():
        shared.setdefault(color, []).append(device)
    clashes = {color: names for color, names in shared.items() if len(names) > 1}
    assert not clashes, f"devices sharing a colour: {clashes}"
    assert all(re.fullmatch(r"#[0-9A-Fa-f]{6}", c) for c in colors.values())
    assert _UNKNOWN not in colors.values()  # grey means "not a device"


def test_devices_that_share_a_panel_never_share_a_colour():
    # The clashes of the old palette: CPU:2 = GPU:0; on an 8-GPU machine GPU:5 = CPU:0 and
    # GPU:7 = GPU:0.
    assert device_color("/cpu:2") != device_color("/gpu:0")
    assert device_color("/gpu:5") != device_color("/cpu:0")
    assert device_color("/gpu:7") != device_color("/gpu:0")
    _assert_distinct([LOCAL.format(f"CPU:{i}") for i in range(4)])  # the tests' stand-ins
    _assert_distinct([LOCAL.format("CPU:0")] + [LOCAL.format(f"GPU:{i}") for i in range(8)])
    _assert_distinct(  # any mix of types, more devices than any palette, several tasks and jobs
        [LOCAL.format(f"{kind}:{i}") for kind in ("CPU", "GPU", "TPU") for i in range(64)]
        + [
            f"/job:{job}/replica:0/task:{task}/device:{kind}:{i}"
            for job in ("worker", "ps")
            for task in range(3)
            for kind in ("CPU", "GPU")
            for i in range(4)
        ]
        + [LOCAL.format("XLA_CPU:0"), LOCAL.format("XLA_GPU:0"), LOCAL.format("MY_CHIP:0")]
    )


def test_a_device_keeps_its_colour_in_every_spelling_and_panel():
    for spellings in (
        ["/cpu:1", "/device:CPU:1", "CPU:1", LOCAL.format("CPU:1"), "/job:localhost/cpu:1"],
        ["/gpu:0", "/device:GPU:0", LOCAL.format("GPU:0")],
    ):
        assert len({device_color(name) for name in spellings}) == 1, spellings
    # Fixed colours for the devices panels show most, whatever was coloured before them.
    assert device_color("/cpu:0") == _PALETTE[0] and device_color("/cpu:1") == _PALETTE[1]
    assert device_color("/gpu:0") == _PALETTE[2]
    late = device_color(LOCAL.format("GPU:40"))  # a colour given on first sight...
    assert device_color("/gpu:40") == late  # ...is kept
    assert device_color("") == device_color("not a device") == _UNKNOWN


def test_text_on_each_chip_colour_is_black_or_white_by_the_higher_wcag_contrast():
    assert text_color_on("#CC79A7").lower() == "#000000"  # 6.86:1 black vs 3.06:1 white
    assert text_color_on("#0072B2").lower() == "#ffffff"  # 5.19:1 white vs 4.05:1 black
    colors = [*_PALETTE, _UNKNOWN] + [device_color(f"/gpu:{i}") for i in range(8, 40)]
    for color in colors:
        black, white = _contrast(color, "#000000"), _contrast(color, "#ffffff")
        chosen = text_color_on(color).lower()
        assert chosen == ("#000000" if black > white else "#ffffff"), (color, black, white)
    rules = re.findall(r"background-color: (#\w{6}); color: (#\w{6})", chip_css())
    assert len(rules) > len(_PALETTE)
    for color, text in rules:  # what the chips use
        other = "#ffffff" if text.lower() == "#000000" else "#000000"
        assert _contrast(color, text) >= _contrast(color, other), (color, text)
