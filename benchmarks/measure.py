"""Timing, memory and widget-traffic helpers (no TensorFlow import here)."""

from __future__ import annotations

import contextlib
import gc
import json
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timing:
    """Wall times of repeated runs, in seconds."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # this process's CPU time, same runs

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def low(self) -> float:
        return min(self.seconds) if self.seconds else float("nan")

    @property
    def high(self) -> float:
        return max(self.seconds) if self.seconds else float("nan")

    def ms(self) -> str:
        """``"123.4 ms [120.1–130.2] n=5"``: median, min–max, repeats."""
        if not self.seconds:
            return "n/a"
        return f"{fmt_ms(self.median)} [{fmt_ms(self.low, unit=False)}–{fmt_ms(self.high, unit=False)}] n={len(self.seconds)}"


def fmt_ms(seconds: float, unit: bool = True) -> str:
    ms = seconds * 1000
    text = f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"
    return f"{text} ms" if unit else text


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def time_once(fn: Callable[[], Any]) -> tuple[float, Any]:
    seconds, _, result = time_cpu_once(fn)
    return seconds, result


def time_cpu_once(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and process CPU seconds of one call, after a full collection (same start for all).

    CPU time counts every thread of this process, so it equals wall time for single-threaded
    Python on an idle machine, and stays honest when other processes compete for the cores.
    """
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    return wall, time.process_time() - cpu, result


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, Timing]:
    """Run each function ``repeats`` times, alternating between them so drift hits all alike."""
    timings = {name: Timing() for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            wall, cpu, _ = time_cpu_once(fn)
            timings[name].seconds.append(wall)
            timings[name].cpu.append(cpu)
    return timings


def python_peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak bytes allocated through Python's allocators (numpy and pandas included) by ``fn``.

    tracemalloc slows Python down, so this is a separate run from the timed ones. Memory that
    TensorFlow's C++ runtime or protobuf's arenas allocate is not seen here: see ``rss_peak``.
    """
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base, result


def rss_peak() -> int:
    """The process's resident-set high-water mark so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# -- widget traffic ---------------------------------------------------------------------------
def _json_default(value: Any) -> Any:
    try:
        from jupyter_client.jsonutil import json_default

        return json_default(value)
    except Exception:
        return str(value)


def message_bytes(data: Any, buffers: Any) -> int:
    """Bytes of one comm message as the kernel would send it: its JSON plus binary buffers."""
    text = json.dumps(data, default=_json_default, separators=(",", ":"))
    extra = sum(memoryview(b).nbytes for b in (buffers or ()))
    return len(text.encode("utf-8")) + extra


# Widgets whose binary buffers are code: the holder of plotly's gzipped widget bundle, which a
# kernel sends once instead of in every timeline's ``_esm`` (tfplace_widget/bundle_holder.py).
CODE_BUFFER_WIDGETS = {"tfplace_widget._widgets.bundle_holder.PlotlyBundle"}


@dataclass
class CommLog:
    """Bytes the widgets would send to the browser: comm opens (full state) and updates."""

    opened: int = 0
    open_bytes: int = 0
    # Of open_bytes: widgets' JavaScript/CSS (anywidget ``_esm``/``_css``, and the buffers of
    # CODE_BUFFER_WIDGETS).
    code_bytes: int = 0
    messages: int = 0
    message_bytes: int = 0

    def reset_messages(self) -> None:
        self.messages = 0
        self.message_bytes = 0


@contextlib.contextmanager
def recording_comms() -> Iterator[CommLog]:
    """Replace ``comm.create_comm`` (what ipywidgets uses to reach the browser) by a recorder.

    Every widget created in the block opens a recording comm: its ``comm_open`` carries the
    widget's full state (exactly what ipywidgets sends to a frontend), later ``comm_msg``s the
    updates. Nothing is sent anywhere; sizes are counted as JSON + binary buffers.
    """
    import comm
    from comm.base_comm import BaseComm

    log = CommLog()

    class RecordingComm(BaseComm):
        def publish_msg(
            self,
            msg_type: str,
            data: Any = None,
            metadata: Any = None,
            buffers: Any = None,
            **keys: Any,
        ) -> None:
            size = message_bytes(data, buffers)
            if msg_type == "comm_open":
                log.opened += 1
                log.open_bytes += size
                state = (data or {}).get("state") or {}
                log.code_bytes += sum(
                    message_bytes(state[key], None) for key in ("_esm", "_css") if key in state
                )
                if state.get("_anywidget_id") in CODE_BUFFER_WIDGETS:
                    log.code_bytes += sum(memoryview(b).nbytes for b in buffers or ())
            elif msg_type == "comm_msg":
                log.messages += 1
                log.message_bytes += size

    original = comm.create_comm
    comm.create_comm = lambda *args, **kwargs: RecordingComm(*args, **kwargs)
    try:
        yield log
    finally:
        comm.create_comm = original
