"""Device colours: devices that share a panel never share a colour, a device keeps its colour
in every panel, text on a colour is the more readable of black and white (WCAG 2), text in a
device's colour is at WCAG AA contrast on light and dark themes, and no two devices of a machine
look alike under the common colour blindnesses (simulated).

Pure Python: no TensorFlow, no widgets.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest
from helpers import run_python

from tfplace_widget._rendering.colors import (
    _PALETTE,
    _UNKNOWN,
    DARK_BACKGROUNDS,
    LIGHT_BACKGROUNDS,
    chip_css,
    device_color,
    ink_colors,
    ink_style,
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


# -- readable text in a device's colour ---------------------------------------------------------
def test_device_colour_text_is_at_wcag_aa_contrast_in_light_and_dark_themes():
    # The backgrounds: JupyterLab 4's --jp-layout-color1 and -2 in each theme, the report's.
    assert {"#ffffff", "#eeeeee"} <= set(LIGHT_BACKGROUNDS)
    assert {"#111111", "#212121", "#424242"} <= set(DARK_BACKGROUNDS)
    colors = [*_PALETTE, _UNKNOWN] + [device_color(LOCAL.format(f"GPU:{i}")) for i in range(8, 40)]
    for color in colors:
        light, dark = ink_colors(color)
        for background in LIGHT_BACKGROUNDS:
            assert _contrast(light, background) >= 4.5, (color, light, background)
        for background in DARK_BACKGROUNDS:
            assert _contrast(dark, background) >= 4.5, (color, dark, background)
        # Text on a chip of the colour (black or white) is at AA contrast too.
        assert _contrast(text_color_on(color), color) >= 4.5, color
    # A colour that reads as it is stays itself (the device keeps its look).
    assert ink_colors("#B42D00")[0] == "#B42D00" and ink_colors("#F0E442")[1] == "#F0E442"
    assert ink_style("#0072B2") == (
        "color:#0071B0;--tfplace-ink-light:#0071B0;--tfplace-ink-dark:#7AB6D7"
    )


# -- colour blindness ---------------------------------------------------------------------------
# Machado, Oliveira and Fernandes (2009), "A Physiologically-based Model for Simulation of Color
# Vision Deficiency", IEEE TVCG 15(6): the matrices for severity 1.0 (dichromacy), applied to
# linear RGB.
MACHADO_2009 = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}
# How far apart two devices' colours must be, in CIEDE2000, in normal vision and in each
# simulation. 2.3 is a just-noticeable difference for large patches side by side; devices are
# told apart in thin timeline bars and 6 px table stripes, where Szafir (2017, "Modeling Color
# Difference for Visualization Design", IEEE TVCG 24(1)) finds the needed difference grows
# several-fold as marks shrink. 10 asks for that, and is what Okabe and Ito's palette, made for
# colour-blind readers, keeps between its own seven colours under these simulations (10.9).
MIN_DELTA_E = 10.0
# The devices that share one machine's panel: 4 CPUs with 8 GPUs, or with 4 TPUs.
MACHINES = {
    "4 CPUs, 8 GPUs": [f"CPU:{i}" for i in range(4)] + [f"GPU:{i}" for i in range(8)],
    "4 CPUs, 4 TPUs": [f"CPU:{i}" for i in range(4)] + [f"TPU:{i}" for i in range(4)],
}


def _linear_rgb(color: str) -> list[float]:
    out = []
    for i in (1, 3, 5):
        c = int(color[i : i + 2], 16) / 255
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return out


def _lab(linear: list[float]) -> tuple[float, float, float]:
    """CIELAB (D65) of linear sRGB."""
    r, g, b = linear
    xyz = (
        (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047,
        0.2126729 * r + 0.7151522 * g + 0.0721750 * b,
        (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883,
    )
    fx, fy, fz = (t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def _seen(color: str, vision: str) -> tuple[float, float, float]:
    """``color`` in CIELAB as seen in ``vision`` ("normal" or a key of ``MACHADO_2009``)."""
    linear = _linear_rgb(color)
    if vision != "normal":
        linear = [
            min(1.0, max(0.0, sum(m * c for m, c in zip(row, linear, strict=True))))
            for row in MACHADO_2009[vision]
        ]
    return _lab(linear)


def _ciede2000(lab1: tuple[float, ...], lab2: tuple[float, ...]) -> float:
    """CIEDE2000 colour difference (Sharma, Wu and Dalal 2005, kL = kC = kH = 1)."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1 = math.degrees(math.atan2(b1, a1)) % 360 if c1 else 0.0
    h2 = math.degrees(math.atan2(b2, a2)) % 360 if c2 else 0.0
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    d_l, d_c = l2 - l1, c2 - c1
    d_h = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    l_bar, c_bar = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_bar = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_bar = (h1 + h2) / 2
    else:
        h_bar = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (
        1
        - 0.17 * math.cos(math.radians(h_bar - 30))
        + 0.24 * math.cos(math.radians(2 * h_bar))
        + 0.32 * math.cos(math.radians(3 * h_bar + 6))
        - 0.20 * math.cos(math.radians(4 * h_bar - 63))
    )
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(c_bar**7 / (c_bar**7 + 25**7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c = 1 + 0.045 * c_bar
    s_h = 1 + 0.015 * c_bar * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt(
        (d_l / s_l) ** 2 + (d_c / s_c) ** 2 + (d_h / s_h) ** 2 + r_t * (d_c / s_c) * (d_h / s_h)
    )


def test_the_colour_difference_is_ciede2000():
    # Pairs 1, 7 and 17 of Sharma, Wu and Dalal's test data.
    assert _ciede2000((50, 2.6772, -79.7751), (50, 0, -82.7485)) == pytest.approx(2.0425, abs=1e-4)
    assert _ciede2000((50, 0, 0), (50, -1, 2)) == pytest.approx(2.3669, abs=1e-4)
    assert _ciede2000((50, 2.5, 0), (73, 25, -18)) == pytest.approx(27.1492, abs=1e-4)
    assert _seen("#ffffff", "normal") == pytest.approx((100, 0, 0), abs=0.01)


@pytest.mark.parametrize("vision", ["normal", *MACHADO_2009])
@pytest.mark.parametrize("machine", list(MACHINES))
def test_no_two_devices_of_a_machine_look_alike_under_colour_blindness(machine, vision):
    devices = MACHINES[machine]
    seen = {d: _seen(device_color(LOCAL.format(d)), vision) for d in devices}
    close = [
        (round(_ciede2000(seen[a], seen[b]), 1), a, b)
        for a, b in itertools.combinations(devices, 2)
        if _ciede2000(seen[a], seen[b]) < MIN_DELTA_E
    ]
    assert not close, f"{vision}: devices too alike (CIEDE2000, device, device): {close}"
    # The simulation changes colours: a palette safe in normal vision alone would fail here.
    if vision == "deuteranopia":
        old_rose, old_green = _seen("#CC6677", vision), _seen("#009E73", vision)
        assert _ciede2000(old_rose, old_green) < MIN_DELTA_E  # the old CPU:2 and GPU:0


MANY_DEVICES = """
from tfplace_widget._rendering.colors import device_color
colors = [device_color(f"/job:w/replica:0/task:{i // 8}/device:GPU:{i % 8}") for i in range(8000)]
print(len(set(colors)), colors.count("#999999"))
"""


def test_colours_are_total_eight_thousand_devices_get_eight_thousand_colours():
    """Issue 31: from the ~4,700th device the colour sequence found no new colour and looped
    for ever, holding its lock (a 100 KB file hung the kernel); in a child process bounded in
    time, since a loop holding the GIL cannot be timed out from a thread."""
    done = run_python(MANY_DEVICES, timeout=60)  # TimeoutExpired: the loop of issue 31
    assert done.stdout.split() == ["8000", "0"]  # each its own, none grey
