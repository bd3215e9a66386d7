"""What XLA ran, from a TF2 profile (XSpace): its HLO modules and one event per executed
HLO instruction.

The TF2 profiler keeps the optimized HLO of every module XLA compiled in this process as an
``HloProto`` (stat ``Hlo Proto`` of an event metadata on the ``/host:metadata`` plane, named
after the module). Each instruction's ``metadata`` names the TF op it came from (``op_name``,
``op_type``) and where that op was made (``source_file``/``source_line``: for TF2 code mostly
TensorFlow's own ``ops.py``; the tracer finds the user's line from the function's debug
info). On XLA:CPU every executed top-level instruction (``dot.2``,
``broadcast_maximum_fusion``...) is an event on a ``/host:CPU`` line with ``hlo_op`` and
``hlo_module`` stats; GPU planes carry the same stats on XLA kernels. This module reads both
as plain data; it runs nothing.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from .._tfadapter.protos import hlo_proto_type
from .xspace import (
    _GPU_PLANE,
    _TASK_ENV_PLANE,
    HOST_PLANE,
    _event_stats,
    _is_derived_line,
    _line_start_ns,
    _profile_start_ns,
    _span_us,
    _text,
    parse_xspace,
)

_METADATA_PLANE = "/host:metadata"
_NOT_OPS = {"XLA_Args", "XLA_Retvals"}  # what XLA names its parameters and results
_HLO_PROTO_STAT = "Hlo Proto"
# An auto-clustered module: "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false_..."
_AUTO_MODULE = re.compile(r"^(cluster_\d+)__")
_PROGRAM_NAME = re.compile(r"(.+)\((\d+)\)")  # a metadata event: "<module>(<program id>)"
_COMPILE = re.compile(r"^\w*Compiler::Compile\w*Executable$")  # CpuCompiler::CompileCpuExecutable
# A compiled program's run on the host thread that launched it; XLA:CPU takes the program's
# buffers inside it, before its first instruction
_EXECUTE = re.compile(r"^\w*Executable::Execute\w*$")  # CpuExecutable::ExecuteAsyncOnStream
# TF names a jit_compile function's module after its FunctionDef: "__inference_f_23" ->
# "a_inference_f_23__XlaMustCompile_true_config_proto_..._.2" (a leading "_" becomes "a"), or
# "a_inference_f_23__.1" when a tf.function without XLA calls it.
# A trace before 2026-12-02 ran a copy of the user's jit function under another name
# (``<name>_tfplace_copy<n>``, _tracing/function_copies.py): its module stands for the user's.
_MODULE_OF_FUNCTION = re.compile(
    r"^a(_(?:inference|forward|backward)_.+?_\d+)(?:_tfplace_copy\d+)?__"
)
# What no user wrote: TensorFlow's own files, and the placeholder XLA writes for a FunctionDef
# without debug info (a traced call's copy of the user's function has none).
_NOT_USER_FILE = re.compile(
    r"[/\\](site|dist)-packages[/\\]|[/\\]tensorflow[/\\]python[/\\]|^dummy_file_name$"
)
_LIBRARY_FILE = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]tensorflow[/\\]python[/\\]")


@dataclass
class HloInstruction:
    """One instruction of a module's computations, with what it computes."""

    name: str
    kind: str  # fusion kind (kLoop, kInput, kOutput...) or opcode (dot, copy...)
    tf_ops: list[str]  # the op_name of it and of every instruction it calls, first seen first
    source: str  # file:line from the HLO metadata when not a library's own line, else ""


@dataclass
class XlaProfile:
    """The HLO modules of a profile (by module name) and the instructions that ran."""

    modules: dict[str, dict[str, HloInstruction]] = field(default_factory=dict)
    # one tuple per executed instruction:
    # (module, instruction, device plane, line id, start µs since the epoch, duration µs)
    runs: list[tuple[str, str, str, int, int, int]] = field(default_factory=list)
    # module -> how many programs XLA compiled of it in this process (one HloProto each: the
    # metadata plane names them "<module>(0)", "<module>(1)"...; one per input shape)
    programs: dict[str, int] = field(default_factory=dict)
    # the ``program_id`` stat of each of ``runs`` (-1 when absent): which compiled program ran
    run_programs: list[int] = field(default_factory=list)
    # one (module, start µs since the epoch, duration µs) per compilation while profiling: the
    # compiler's "CpuCompiler::CompileCpuExecutable" event (stat ``name``: the module), TF 2.21
    compiles: list[tuple[str, int, int]] = field(default_factory=list)
    # one (module, line id, start, end µs since the epoch) per run of a compiled program on a
    # host line: XLA's ``CpuExecutable::ExecuteAsyncOnStream`` (etc.) around its instructions
    executions: list[tuple[str, int, int, int]] = field(default_factory=list)


def auto_cluster_of_module(module: str) -> str:
    """The auto-clustered cluster a module was compiled from (``cluster_0``), or ``""``."""
    match = _AUTO_MODULE.match(module)
    return match.group(1) if match else ""


def function_of_module(module: str) -> str:
    """The FunctionDef a jit_compile module was compiled from (``__inference_f_23``), or ``""``."""
    match = _MODULE_OF_FUNCTION.match(module)
    return "_" + match.group(1) if match else ""


def xla_from_xspace(data: bytes) -> XlaProfile:
    """The HLO modules and executed instructions in an ``.xplane.pb`` (empty without XLA)."""
    planes = [(_text(plane.name), plane) for plane in parse_xspace(data).planes]
    profile = XlaProfile()
    origin_ns = max((_profile_start_ns(p) for n, p in planes if n == _TASK_ENV_PLANE), default=0)
    for name, plane in planes:
        if name == HOST_PLANE or _GPU_PLANE.fullmatch(name):
            _read_runs(plane, name, origin_ns, profile)
        if name == HOST_PLANE:
            _read_compiles(plane, origin_ns, profile.compiles)
    ran = {run[0] for run in profile.runs}
    for name, plane in planes:
        if name == _METADATA_PLANE:
            _read_modules(plane, profile.modules, profile.programs, ran)
    return profile


def _read_compiles(plane: Any, origin_ns: int, compiles: list) -> None:
    """XLA's compilations of a module (``CpuCompiler::CompileCpuExecutable``...: an event named
    ``<Backend>Compiler::Compile...Executable`` whose ``name`` stat is the module)."""
    stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
    wanted = {key for key, meta in plane.event_metadata.items() if _COMPILE.match(_text(meta.name))}
    if not wanted:
        return
    for line in plane.lines:
        if _is_derived_line(line):
            continue
        line_ns = _line_start_ns(line, origin_ns)
        for event in line.events:
            if event.metadata_id not in wanted:
                continue
            module = _event_stats(event, stat_names).get("name") if event.stats else None
            if isinstance(module, str) and module:
                start, duration = _span_us(line_ns, event)
                compiles.append((module, start, duration))


def _read_modules(
    plane: Any,
    modules: dict[str, dict[str, HloInstruction]],
    programs: dict[str, int],
    ran: set[str],
) -> None:
    """Count the programs of every module; parse the HLO of those that ``ran`` only (the plane
    holds every module this process compiled: a notebook's other jit functions too)."""
    names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
    for meta in plane.event_metadata.values():
        for stat in meta.stats:
            if names.get(stat.metadata_id) != _HLO_PROTO_STAT or not stat.bytes_value:
                continue
            program = _PROGRAM_NAME.fullmatch(_text(meta.name))
            if program is not None and program.group(1) not in ran:
                programs[program.group(1)] = programs.get(program.group(1), 0) + 1
                continue
            module = _hlo_module(stat.bytes_value)
            if module is not None:
                modules[module.name] = _instructions(module)
                programs[module.name] = programs.get(module.name, 0) + 1


def _hlo_module(data: bytes) -> Any:
    proto = hlo_proto_type()()
    try:
        proto.ParseFromString(data)
    except Exception:  # a damaged or foreign proto: its instructions stay unnamed
        return None
    return proto.hlo_module


def _instructions(module: Any) -> dict[str, HloInstruction]:
    """Every instruction of every computation, with the TF ops of what it calls."""
    computations = {c.id: c for c in module.computations}
    ops_of: dict[int, list[str]] = {}

    def computation_ops(cid: int, seen: frozenset = frozenset()) -> list[str]:
        if cid in ops_of:
            return ops_of[cid]
        found: list[str] = []
        computation = computations.get(cid)
        if computation is not None and cid not in seen:
            for instruction in computation.instructions:
                found += instruction_ops(instruction, seen | {cid})
        ops_of[cid] = list(dict.fromkeys(found))
        return ops_of[cid]

    def instruction_ops(instruction: Any, seen: frozenset = frozenset()) -> list[str]:
        name = instruction.metadata.op_name
        own = [name] if name and name not in _NOT_OPS else []
        for cid in instruction.called_computation_ids:
            own += computation_ops(cid, seen)
        return list(dict.fromkeys(own))

    out: dict[str, HloInstruction] = {}
    for computation in module.computations:
        for instruction in computation.instructions:
            meta = instruction.metadata
            source = ""
            if meta.source_file and not _NOT_USER_FILE.search(meta.source_file):
                source = f"{meta.source_file}:{meta.source_line}"
            kind = instruction.fusion_kind if instruction.opcode == "fusion" else ""
            out[instruction.name] = HloInstruction(
                instruction.name,
                kind or instruction.opcode,
                instruction_ops(instruction),
                source,
            )
    return out


def _read_runs(plane: Any, device: str, origin_ns: int, profile: XlaProfile) -> None:
    """Events with ``hlo_op`` and ``hlo_module`` stats (on the event or its metadata), and on
    the host the program runs around them (:data:`_EXECUTE`)."""
    runs, programs = profile.runs, profile.run_programs
    stat_names = {key: _text(meta.name) for key, meta in plane.stat_metadata.items()}
    if "hlo_op" not in stat_names.values() and "hlo_module" not in stat_names.values():
        return
    known: dict[int, tuple[str, str] | None] = {}
    known_program: dict[int, Any] = {}
    executes = set()
    for key, meta in plane.event_metadata.items():
        stats = _event_stats(meta, stat_names)
        known[key] = (stats.get("hlo_module", ""), stats.get("hlo_op", "")) if stats else None
        known_program[key] = stats.get("program_id", -1) if stats else -1
        if device == HOST_PLANE and _EXECUTE.match(_text(meta.name)):
            executes.add(key)
    for line in plane.lines:
        if _is_derived_line(line):
            continue
        line_ns = _line_start_ns(line, origin_ns)
        spans, first = [], len(runs)
        for event in line.events:
            if event.metadata_id in executes:
                start, duration = _span_us(line_ns, event)
                spans.append((start, start + duration))
                continue
            stats = _event_stats(event, stat_names) if event.stats else {}
            module, op = known.get(event.metadata_id) or ("", "")
            module = stats.get("hlo_module", module)
            op = stats.get("hlo_op", op)
            if not isinstance(module, str) or not module or not isinstance(op, str) or not op:
                continue
            start, duration = _span_us(line_ns, event)
            runs.append((module, op, device, line.id, start, duration))
            program = stats.get("program_id", known_program.get(event.metadata_id, -1))
            programs.append(program if isinstance(program, int) else -1)
        if spans:  # a program's run: the module of the first instruction inside it
            mine = sorted((run[4], run[0]) for run in runs[first:])
            for start, end in spans:
                at = bisect.bisect_left(mine, (start, ""))
                if at < len(mine) and mine[at][0] <= end:
                    profile.executions.append((mine[at][1], line.id, start, end))
