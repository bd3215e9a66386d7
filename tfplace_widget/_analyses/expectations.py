"""Expectations: ``--expect-device PATTERN=DEVICE`` and ``expect={PATTERN: DEVICE}`` checks,
parsed and evaluated against a trace.

Pure: an :class:`Expectation` says which ops (a glob on their names) should be on which device
(a type, a short name, a task or a full name); :func:`evaluate_expectations` finds the ops
each one matches in a trace and those that are elsewhere. What to check against (the trace, or
its prediction for a GPU machine) is :mod:`.checks`'s, shared by the command line and
``assert_placement``; what to print is theirs.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .._model.devices import DeviceSpec
    from .._model.trace import PlacementTrace


class ExpectationError(ValueError):
    """An ``--expect-device`` value (or ``expect=`` entry) that is not a check, or one that
    cannot be evaluated against the trace (no such device, no matching op): bad input, one
    line."""


@dataclass(frozen=True)
class Expectation:
    """``--expect-device PATTERN=DEVICE``: ops matching the glob are on ``DEVICE``.

    ``text`` is ``PATTERN=DEVICE``; ``shown`` names it in errors as the user wrote it
    (``--expect-device 'x=GPU'`` or ``expect={'x': 'GPU'}``)."""

    text: str
    pattern: str
    device: str
    spec: DeviceSpec
    shown: str

    def regex(self) -> re.Pattern:
        return re.compile(fnmatch.translate(self.pattern))


@dataclass(frozen=True)
class Outcome:
    """One expectation against a trace: the ops it matched and those of them elsewhere."""

    expectation: Expectation
    matched: pd.DataFrame
    wrong: pd.DataFrame


def parse_expectations(values: Sequence[str]) -> list[Expectation]:
    """The ``--expect-device`` values, checked before anything runs."""
    found = []
    for text in values:
        pattern, equals, device = text.rpartition("=")
        shown = f"--expect-device {text!r}"
        if not equals or not pattern.strip() or not device.strip():
            raise ExpectationError(
                f"{shown}: expected PATTERN=DEVICE, e.g. 'tower_*=GPU' or 'loss=/device:CPU:0'."
            )
        found.append(_expectation(text, pattern.strip(), device.strip(), shown))
    return found


def expectations_from(expect: Mapping[str, str]) -> list[Expectation]:
    """``assert_placement``'s ``expect={PATTERN: DEVICE}``, by the rules of ``--expect-device``."""
    if not isinstance(expect, Mapping):
        raise TypeError(
            "expect must map op-name globs to devices, e.g. {'*dense*': 'GPU'}, not "
            f"{type(expect).__name__}."
        )
    found = []
    for pattern, device in expect.items():
        shown = f"expect={{{pattern!r}: {device!r}}}"
        if not isinstance(pattern, str) or not isinstance(device, str):
            raise TypeError(f"{shown}: a glob of op names and a device, both strings.")
        if not pattern.strip() or not device.strip():
            raise ExpectationError(f"{shown}: an empty glob or device; e.g. {{'*dense*': 'GPU'}}.")
        found.append(_expectation(f"{pattern}={device}", pattern, device.strip(), shown))
    return found


def _expectation(text: str, pattern: str, device: str, shown: str) -> Expectation:
    from .._model.devices import parse_device

    try:
        spec = parse_device(device)
    except ValueError as exc:
        raise ExpectationError(f"{shown}: {exc}") from exc
    if spec.type is None and spec.job is None and spec.task is None:
        raise ExpectationError(
            f"{shown}: {device!r} names no device type or task; write "
            "GPU, CPU, GPU:0, a task of a cluster such as /job:ps/task:0, or a full name "
            "such as /job:localhost/replica:0/task:0/device:GPU:0."
        )
    return Expectation(text, pattern, device, spec, shown)


def missing_device_types(trace: PlacementTrace, expectations: Sequence[Expectation]) -> list[str]:
    """The device types some expectation names (not a task's) that ``trace`` has no device of."""
    asked = {e.spec.type for e in expectations if e.spec.type is not None}  # not a task's
    return sorted(asked - device_types(trace.devices))  # type: ignore[arg-type]


def device_types(devices: Sequence[str]) -> set[str | None]:
    """The types (``CPU``, ``GPU``...) of ``devices``, full names or short."""
    from .._model.devices import canonical_device, parse_device

    def device_type(name: str) -> str | None:
        try:
            return parse_device(canonical_device(name)).type
        except ValueError:
            return None

    return {device_type(d) for d in devices}


def gpus_named(expectations: Sequence[Expectation]) -> int:
    """The GPUs a prediction needs for ``expectations``: 1, or more when ``GPU:1``... is named."""
    return max(
        [1]
        + [
            e.spec.index + 1
            for e in expectations
            if e.spec.type == "GPU" and e.spec.index is not None
        ]
    )


def evaluate_expectations(
    checked: PlacementTrace, expectations: Sequence[Expectation], basis: str
) -> list[Outcome]:
    """Each expectation's :class:`Outcome` in ``checked`` (``basis`` names it in errors)."""
    from .._model.devices import canonical_device, parse_device
    from .summary import short_names

    devices = checked.devices
    names = checked.ops["op"].astype(str)
    # _Send/_Recv named after the op they serve, _Retval...: not the user's ops to expect.
    theirs = (checked.ops["how"].astype(str) != "runtime").to_numpy(dtype=bool)
    outcomes = []
    for expectation in expectations:
        if not any(expectation.spec.matches(parse_device(canonical_device(d))) for d in devices):
            shown = ", ".join(short_names(devices).values()) or "none"
            raise ExpectationError(
                f"{expectation.shown}: no device {expectation.device!r} in "
                f"{basis} (its devices: {shown})."
            )
        matches = names.str.match(expectation.regex()).to_numpy(dtype=bool)
        matched = checked.ops[matches & theirs]
        if matched.empty:
            sample = ", ".join(names.head(5))
            raise ExpectationError(
                f"{expectation.shown}: no op matches {expectation.pattern!r} "
                f"(globs match the whole name, case-sensitive, and ops the runtime adds are left "
                f"out; names look like: {sample})."
            )
        on = matched["device"].astype(str).map(lambda d, spec=expectation.spec: _on(spec, d))
        wrong = matched[~on.to_numpy(dtype=bool)]
        outcomes.append(Outcome(expectation, matched, wrong))
    return outcomes


def _on(spec: DeviceSpec, device: str) -> bool:
    from .._model.devices import canonical_device, parse_device

    try:
        return bool(device) and spec.matches(parse_device(canonical_device(device)))
    except ValueError:
        return False
