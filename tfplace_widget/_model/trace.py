"""``PlacementTrace``: the public result, three DataFrames and the devices of one traced run."""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .graphfacts import GraphFacts
from .memory import empty_memory
from .services import services
from .xla import empty_xla

# trace.raw of TF2 code traced across the tasks of a cluster under a tf.distribute strategy:
# JSON {"strategy": its name, "tasks": {"/job:worker/task:0": {"collectives": {op: group}}}}.
# Analyses read it to know the placement was the strategy's, per task.
STRATEGY_TASKS_RAW = "strategy_tasks.json"

# Held while a trace's findings are found: a reader that comes meanwhile (a second panel's
# thread, the user's next cell) waits for that answer instead of finding them again beside it
# (at a million ops: twice the half-minute and the 1.5 GB). Reentrant: a cluster's findings
# read its tasks' own.
_FINDING = threading.RLock()


def strategy_of(trace: Any) -> str:
    """The tf.distribute strategy a trace across tasks ran under (``""`` for any other)."""
    import json

    data = getattr(trace, "raw", {}).get(STRATEGY_TASKS_RAW)
    return str(json.loads(data).get("strategy", "")) if data else ""


@dataclass(eq=False)
class PlacementTrace:
    """Where every op of one traced run was placed, why, and when it ran.

    Build one with :func:`tfplace_widget.trace_placement`, :meth:`from_run_metadata` or
    :meth:`from_chrome_trace`; read ``ops``, ``events``, ``transfers`` and ``devices``.

    Time columns share one axis: microseconds since the start of the first traced step (the
    earliest record), so several steps follow each other on the timeline. ``ops.start_us`` is
    an op's first start on that axis; ``ops.duration_us`` is the *sum* over its ``runs``
    (mean per run = ``duration_us / runs``); ``runs`` counts its op-level records in all traced
    steps (a GPU op is counted by its launches, not by its kernels). ``_Send``/``_Recv`` are
    never in step_stats, so their time columns and ``runs`` are missing (``<NA>``), not 0.
    """

    ops: pd.DataFrame
    events: pd.DataFrame
    transfers: pd.DataFrame
    devices: list[str]
    inputs: dict[str, list[str]] = field(default_factory=dict, repr=False)
    log: str = field(default="", repr=False)
    source: str = ""
    truncated: bool = False
    # "graph": a graph builder run in a Session; "function": TF2 code run in the eager
    # runtime; "loaded": read from a file or proto.
    mode: str = "loaded"
    # Things the panel header says about the whole trace (e.g. XLA hid the ops).
    notes: list[str] = field(default_factory=list, repr=False)
    # What the graph as built said about each op (requests, colocation, kernels); None for a
    # trace loaded without its graph. Analyses (predictions, findings) read it.
    facts: GraphFacts | None = field(default=None, repr=False)
    # True for predict_placement's result: placed by the predictor, not run.
    predicted: bool = False
    # The protos the trace was made from, serialized, by file name: graph mode
    # ``run_metadata_<step>.pb`` and ``graph_def.pb``; TF2 code ``xspace.pb``,
    # ``function_graphs.pb`` and ``functions.json``; ``from_run_metadata`` what it was given.
    # ``save`` keeps them so that a later version can re-derive columns; empty for traces
    # loaded from a Chrome trace and for predictions.
    raw: dict[str, bytes] = field(default_factory=dict, repr=False)
    # Which mode ran and why, one sentence ("auto: graph mode because ..."), from
    # trace_placement; "" for a trace read from TensorFlow's files or protos.
    mode_reason: str = ""
    # One row per executed HLO instruction of an XLA cluster (_model/columns.py XLA_COLUMNS:
    # cluster, instruction, kind, device, start_us, duration_us, tf_ops, source); empty
    # without XLA. The cluster's TF ops are in ``ops`` (how "xla", their instruction in xla_op).
    xla: pd.DataFrame = field(default_factory=empty_xla, repr=False)
    # A prediction's: the op-level runs (``events`` rows) of the calls of the trace it was
    # predicted from, which say how much of the step a predicted finding is about; None for a
    # trace that ran (its own ``events`` say it) and for a prediction loaded from a file.
    measured: pd.DataFrame | None = field(default=None, repr=False)
    # One row per change of a device's live bytes from TensorFlow's allocator records
    # (_model/columns.py MEMORY_COLUMNS: device, allocator, time_us, bytes, live_bytes, op,
    # kind); graph mode's FULL_TRACE step_stats have them; kind "persistent": what a device
    # holds through the step (variables, constants). Empty (with
    # its columns) where the trace has none: Chrome traces, files saved before it. The ``memory``
    # property (below the class) reads and writes ``_memory``.
    memory: pd.DataFrame = field(default_factory=empty_memory, repr=False)
    # defer_memory's ``make``, until ``memory`` is first read
    _memory_maker: Callable[[], pd.DataFrame] | None = field(default=None, init=False, repr=False)

    def defer_memory(self, make: Callable[[], pd.DataFrame]) -> None:
        """Make ``memory`` on first use by calling ``make()`` (a prediction's memory, which
        ``predict_placement`` need not pay for when only the placement is read)."""
        self._memory_maker = make

    def _get_memory(self) -> pd.DataFrame:
        if self._memory_maker is not None:
            self._memory, self._memory_maker = self._memory_maker(), None
        return self._memory

    def _set_memory(self, value: pd.DataFrame) -> None:
        self._memory, self._memory_maker = value, None

    def __copy__(self) -> PlacementTrace:
        # a copy shares the deferred memory (pickling, below, makes it)
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        return clone

    def __getstate__(self) -> dict[str, Any]:
        # a deferred memory is made now: its maker is code, not data
        return {**self.__dict__, "_memory": self.memory, "_memory_maker": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        if "memory" in state:  # pickled when memory was a plain attribute
            state["_memory"] = state.pop("memory")
        state.setdefault("_memory", empty_memory())
        self.__dict__.update(state)

    @property
    def findings(self) -> pd.DataFrame:
        """What to look at first: CPU fallbacks, costly transfers, soft moves... one row each,
        most severe first (see :func:`tfplace_widget._analyses.findings.find_findings`)."""
        cached = self.__dict__.get("_findings_cache")
        if cached is None:
            with _FINDING:  # found once, whichever threads ask
                cached = self.__dict__.get("_findings_cache")
                if cached is None:
                    cached = self.__dict__["_findings_cache"] = services().find_findings(self)
        return cached

    @property
    def all_findings(self) -> pd.DataFrame:
        """Every finding, the immaterial ones too (``evidence["material"]`` 0: what they are
        about takes under 1% of the step, or not in most traced steps); ``findings`` lists
        only the material ones, and the views show those."""
        return services().find_findings(self, immaterial=True)

    def memory_peaks(self) -> pd.DataFrame:
        """Each device's memory peak in the traced step, from TensorFlow's allocator records
        (``memory``): one row per device and allocator with ``peak_bytes``, ``peak_time_us``,
        and the ``ops`` live at the peak with the bytes each holds (``ops_bytes``, most
        first), and apart from it what the device holds through the step
        (``persistent_bytes``, ``persistent_ops``, ``persistent_ops_bytes``: variables,
        constants); no row when the trace has no records. See
        :func:`tfplace_widget._analyses.memory.memory_peaks`."""
        return services().memory_peaks(self)

    def fits_on(self, gib: float = 16) -> Any:
        """Whether a prediction's step fits on a GPU of ``gib`` GiB: ``fits``, ``need_bytes``
        (the largest predicted GPU peak of ``memory`` plus what that GPU holds through the
        step), ``at_op`` (the op whose allocation reached it), ``device``,
        ``persistent_bytes`` (the variables' and constants' part of ``need_bytes``). Only for ``predict_placement``'s trace (``ValueError``
        otherwise). See :func:`tfplace_widget._analyses.predict.memory.fits_on`."""
        return services().fits_on(self, gib)

    # -- fixes (tfplace_widget._tracing.fixes: they run the traced code again) -----------------
    def try_fix(self, finding: Any) -> Any:
        """Run the traced code again with ``finding``'s fix (a row of ``findings``, its index,
        or ``(kind, ops)``) and return its measured effect (a ``tfplace_widget.FixEffect``); see
        :func:`tfplace_widget._tracing.fixes.try_fix`."""
        return services().try_fix(self, finding)

    def suggest_placement(self) -> Any:
        """The verified fixes of ``findings`` applied together, measured against the code as
        it is (a ``FixEffect``); see :func:`tfplace_widget._tracing.fixes.suggest_placement`."""
        return services().suggest_placement(self)

    # -- lookups ------------------------------------------------------------------------------
    def device_of(self, op_name: str) -> str:
        """The device of one op.

        Args:
            op_name: The op's name as ``ops["op"]`` has it (e.g. ``"C"``).

        Returns:
            Its device's full name, e.g. ``"/job:localhost/replica:0/task:0/device:CPU:1"``.

        Raises:
            KeyError: No op of that name; the message names close matches.
            ValueError: The name has rows on several devices (``_SOURCE`` in every partition,
                an op of a tf.function called under two ``tf.device`` scopes, merged runs),
                so there is no one answer; the message names them all
                (``trace.ops[trace.ops["op"] == name]`` lists each).
        """
        index = self._device_index()
        if op_name in index:
            several = self.__dict__.get("_devices_of_repeated_names")
            if several is None:  # once per trace: names with rows on more than one device
                ops = self.ops
                repeated = ops[ops["op"].duplicated(keep=False)]
                several = {
                    name: list(dict.fromkeys(group))
                    for name, group in repeated.groupby("op", sort=False)["device"]
                }
                several = {name: found for name, found in several.items() if len(found) > 1}
                self.__dict__["_devices_of_repeated_names"] = several
            if op_name in several:
                found = several[op_name]
                raise ValueError(
                    f"Op {op_name!r} is on {len(found)} devices ({', '.join(found)}), so "
                    f"device_of has no single answer. trace.ops[trace.ops['op'] == "
                    f"{op_name!r}] lists each of its rows."
                )
            return index[op_name]
        close = difflib.get_close_matches(op_name, list(index), n=5, cutoff=0.6)
        contains = [n for n in index if op_name.lower() in n.lower()][:5]
        suggestions = list(dict.fromkeys(close + contains))[:5]
        hint = f" Close matches: {', '.join(suggestions)}." if suggestions else ""
        raise KeyError(f"No op named {op_name!r} in this trace.{hint}")

    def _device_index(self) -> dict[str, str]:
        cached = self.__dict__.get("_device_index_cache")
        if cached is None:
            cached = dict(zip(self.ops["op"], self.ops["device"], strict=True))
            self.__dict__["_device_index_cache"] = cached
        return cached

    def consumers_of(self, op_name: str) -> list[str]:
        """Ops of the executed graph that read an output of ``op_name``.

        Args:
            op_name: The op's name as ``ops["op"]`` has it.

        Returns:
            The names of the ops that read one of its outputs (empty when none does).
        """
        return [op for op, inputs in self.inputs.items() if op_name in inputs]

    def __repr__(self) -> str:
        return (
            f"PlacementTrace({len(self.ops)} ops on {len(self.devices)} devices, "
            f"{len(self.events)} events, {len(self.transfers)} transfers)"
        )

    # -- save, load, export: through the services the package installs (_model/services.py) ------
    def save(self, path: str | os.PathLike, *, overwrite: bool = True) -> str:
        """Write everything the panel shows to one ``.tfplace`` file (a zip of JSON tables and
        the raw protos).

        ``PlacementTrace.load(path)`` or ``show_placement(path)`` opens it again with the same
        frames (dtypes included), ``device_of``, findings and panel.

        Args:
            path: The file to write.
            overwrite: Replace an existing file, once the new one is complete (the default);
                ``False`` keeps it, even one another process makes while this one writes.

        Returns:
            The path written.

        Raises:
            TraceWriteError: The file cannot be written (also an ``OSError``), or it exists and
                ``overwrite`` is ``False`` (then also a ``FileExistsError``).
        """
        findings = self.__dict__.get("_findings_cache")
        return services().save(self, path, overwrite=overwrite, findings=findings)

    @classmethod
    def load(cls, path: str | os.PathLike) -> PlacementTrace:
        """The trace ``save`` wrote to ``path``.

        Args:
            path: A ``.tfplace`` file.

        Returns:
            The trace, with the same frames (dtypes included) and findings.

        Raises:
            TraceError: The file is missing, not a ``.tfplace`` file, damaged, past the size
                limits, or from a newer version; the message names the file and the fix.
        """
        saved = services().read(path)
        trace = cls(**saved.fields)
        trace.facts, trace.measured, trace.raw = saved.facts, saved.measured, saved.raw
        if saved.findings is not None:
            trace.__dict__["_findings_cache"] = saved.findings
        return trace

    def to_chrome_trace(self, path: str | os.PathLike, *, overwrite: bool = True) -> str:
        """Write the timeline as Chrome trace-event JSON for Perfetto UI and chrome://tracing.

        Args:
            path: The file to write; gzipped when it ends in ``.gz``.
            overwrite: As in ``save``.

        Returns:
            The path written.

        Raises:
            ValueError: The trace is a prediction (no events): save it instead.
            TraceWriteError: As in ``save``.
        """
        return services().to_chrome_trace(self, path, overwrite=overwrite)

    def to_html(self, path: str | os.PathLike, *, search: str = "", overwrite: bool = True) -> str:
        """Write one self-contained HTML report: the header, device chips, the searchable
        table and the timeline, plotly.js embedded (it opens offline, with no kernel).

        Args:
            path: The file to write.
            search: A search the report opens with (the panel's rules), ``""`` for none.
            overwrite: As in ``save``.

        Returns:
            The path written.

        Raises:
            TraceWriteError: As in ``save``.
        """
        return services().to_html(self, path, search=search, overwrite=overwrite)

    def to_frames(self) -> dict[str, pd.DataFrame]:
        """Copies of the trace's tables, to change or join without changing the trace.

        Returns:
            ``ops``, ``events`` and ``transfers`` (in that order, by name), then ``xla`` when
            an XLA cluster ran (one row per executed HLO instruction) and ``memory`` when
            TensorFlow recorded allocations.
        """
        return services().to_frames(self)

    def to_csv(self, folder: str | os.PathLike, *, overwrite: bool = True) -> dict[str, str]:
        """Write ``ops.csv``, ``events.csv`` and ``transfers.csv`` (and ``xla.csv`` when an
        XLA cluster ran, ``memory.csv`` when TensorFlow recorded allocations): UTF-8, a header,
        no index column.

        Args:
            folder: Where to write them (made if missing).
            overwrite: Replace existing files (the default); ``False`` writes none of them
                when one exists.

        Returns:
            The paths written, by frame name.

        Raises:
            TraceWriteError: As in ``save``.
        """
        return services().to_csv(self, folder, overwrite=overwrite)

    def to_parquet(self, folder: str | os.PathLike, *, overwrite: bool = True) -> dict[str, str]:
        """Write ``ops.parquet``, ``events.parquet`` and ``transfers.parquet`` (and
        ``xla.parquet``), dtypes kept.

        Args:
            folder: Where to write them (made if missing).
            overwrite: As in ``to_csv``.

        Returns:
            The paths written, by frame name.

        Raises:
            ImportError: pyarrow is not installed (``pip install 'tfplace_widget[parquet]'``).
            TraceWriteError: As in ``save``.
        """
        return services().to_parquet(self, folder, overwrite=overwrite)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_run_metadata(
        cls, run_metadata: Any, graph: Any = None, *, devices: Sequence[str] = ()
    ) -> PlacementTrace:
        """Build a trace from a RunMetadata (proto, serialized bytes, or a .pb/.pbtxt path).

        Args:
            run_metadata: A ``RunMetadata`` proto, its bytes, or a ``.pb``/``.pbtxt`` path; or
                a list of them (several traced steps of one graph).
            graph: The graph that ran: a ``tf.Graph``, ``GraphDef``, its bytes, or a
                ``.pb``/``.pbtxt`` path. Without it the requested devices are unknown and
                ``how`` says ``unknown``.
            devices: Devices of the machine to list in ``devices`` even if no op ran on them.

        Returns:
            The trace.

        Raises:
            TraceError: A file that is missing, damaged or not a RunMetadata.
        """
        return services().from_run_metadata(run_metadata, graph, devices=devices)

    @classmethod
    def from_chrome_trace(cls, path: str | os.PathLike) -> PlacementTrace:
        """Build a trace from a Chrome-trace JSON written by TF's ``timeline.py``.

        Args:
            path: The ``.json`` file (``.json.gz``: read gzipped; names in any case).

        Returns:
            The trace; ``how`` says ``unknown`` (the file has no graph).

        Raises:
            TraceError: The file is damaged or has a bad field (a time that is not a finite
                number of microseconds, a negative duration...), naming the record and the
                field.
        """
        return services().from_chrome_trace(path)

    @classmethod
    def from_xspace(cls, path: str | os.PathLike) -> PlacementTrace:
        """Build a trace from a saved TF2 profile, the ``<host>.xplane.pb`` that
        ``tf.profiler.experimental.start(logdir)`` / ``stop()`` or TensorBoard's profiler wrote.

        Args:
            path: The ``.xplane.pb`` file (``.gz``: read gzipped).

        Returns:
            The trace, with the profile's allocator records in ``memory``; ``how`` says
            ``unknown`` (the file has no graph). An op the profile ties to one GPU alone (its
            kernels or copies there, or chunks of that GPU's own allocator ``GPU_<N>_bfc``) is
            on that GPU; other host ops (``_Arg``, ``_Send``...) are on ``/host:CPU``, as the
            profile does not say their device.

        Raises:
            TraceError: The file is missing, too large, or not an XSpace.
        """
        return services().from_xspace(path)


# ``memory`` is a dataclass field (for __init__, fields() and dataclasses.replace) and this
# property over ``_memory``: the class body cannot give one name both.
PlacementTrace.memory = property(  # type: ignore[assignment]
    PlacementTrace._get_memory,
    PlacementTrace._set_memory,
    doc="One row per change of a device's live bytes, from TensorFlow's allocator records "
    "(MEMORY_COLUMNS); a prediction's is made when first read.",
)
