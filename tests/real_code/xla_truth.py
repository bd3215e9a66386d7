"""XLA's own word on what a ``jit_compile`` cluster became: the optimized HLO it dumped.

The oracle's process sets ``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`` before
TensorFlow starts, so XLA writes every module it compiles as text
(``module_NNNN.<module>.cpu_after_optimizations.txt``): the program it ran, its instructions'
names, opcodes and fusion kinds, the computations each calls (``calls=``, ``to_apply=``...)
and each instruction's ``metadata={op_type=... op_name=...}`` (the TF op it came from). Which
device ran the cluster is the placement log's ``Executing op __inference_<f>_N in device D``.
None of this goes through the tool's code: the tool reads the profiler's HloProtos instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ground_truth import function_name

DUMP_FLAGS = "--xla_dump_to={} --xla_dump_hlo_as_text"
_AFTER = re.compile(r"^module_(\d+)\.(.+)\.cpu_after_optimizations\.txt$")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_OPCODE = re.compile(r"(?<![\w.\-%])([a-z][a-z0-9\-]*)\(")
_CALLED = re.compile(r"\b(?:calls|to_apply|condition|body)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_OP_NAME = re.compile(r'\bop_name="([^"]*)"')
_KIND = re.compile(r"\bkind=(k\w+)")
_MODULE_FUNCTION = re.compile(r"^a(_(?:inference|forward|backward)_.+?_\d+)__")
NOT_OPS = {"XLA_Args", "XLA_Retvals"}  # what XLA's metadata names its parameters and results


@dataclass
class Instruction:
    name: str
    opcode: str
    kind: str  # the fusion kind (kLoop...) or the opcode, as the tool's trace.xla.kind
    op_name: str
    called: list[str]


@dataclass
class Module:
    """One compiled program: its computations (name -> instructions) and its entry's name."""

    name: str
    file: str
    computations: dict[str, dict[str, Instruction]] = field(default_factory=dict)
    entry: str = ""

    @property
    def function(self) -> str:
        """The jit function's display name (``train_mnist``), ``""`` for other modules."""
        match = _MODULE_FUNCTION.match(self.name)
        return function_name("_" + match.group(1)) if match else ""

    @property
    def top(self) -> dict[str, Instruction]:
        return self.computations.get(self.entry, {})

    def op_names(self, instruction: str) -> set[str]:
        """The op_name of a top-level instruction and of all it calls, transitively."""
        names: set[str] = set()
        todo = [self.top[instruction]] if instruction in self.top else []
        seen: set[str] = set()
        while todo:
            current = todo.pop()
            if current.op_name:
                names.add(current.op_name)
            for computation in current.called:
                if computation not in seen:
                    seen.add(computation)
                    todo.extend(self.computations.get(computation, {}).values())
        return names


def parse_hlo(text: str, file: str = "") -> Module:
    """A ``Module`` from XLA's HLO text (``HloModule name, ...`` then its computations)."""
    first = text.split("\n", 1)[0]
    module = Module(first.removeprefix("HloModule ").split(",", 1)[0].strip(), file)
    current: dict[str, Instruction] | None = None
    for line in text.splitlines()[1:]:
        header = _HEADER.match(line)
        if header:
            current = module.computations.setdefault(header.group(2), {})
            if header.group(1):
                module.entry = header.group(2)
            continue
        if line.startswith("}"):
            current = None
            continue
        found = _INSTRUCTION.match(line) if current is not None else None
        if not found:
            continue
        name, rest = found.groups()
        opcode = _OPCODE.search(rest)
        called = _CALLED.findall(rest)
        for branches in _BRANCHES.findall(rest):
            called += [b.strip().lstrip("%") for b in branches.split(",") if b.strip()]
        op_name = _OP_NAME.search(rest)
        kind = _KIND.search(rest)
        code = opcode.group(1) if opcode else ""
        current[name] = Instruction(
            name,
            code,
            kind.group(1) if code == "fusion" and kind else code,
            op_name.group(1) if op_name else "",
            called,
        )
    return module


def dumped_modules(folder: str | Path) -> list[Module]:
    """Every program XLA compiled in this process so far, in the order it compiled them."""
    found = []
    for path in Path(folder).glob("module_*.cpu_after_optimizations.txt"):
        match = _AFTER.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return [parse_hlo(p.read_text(), p.name) for _, p in sorted(found)]


def cluster_devices(eager_ops: list[tuple]) -> dict[str, set[str]]:
    """``function -> devices`` of the functions the user's run executed eagerly (the log's
    ``Executing op __inference_<function>_N in device D``)."""
    found: dict[str, set[str]] = {}
    for op_type, device in eager_ops:
        if op_type.startswith("__inference_"):
            found.setdefault(function_name(op_type), set()).add(device)
    return found


def _short(device: str) -> str:
    return str(device).split("device:")[-1].upper()


def _hlo_names(op: str, cluster: str) -> list[str]:
    """The names XLA's metadata may give the trace's op: its own, or without the
    ``<cluster>/`` the trace puts in front of a name another row had already."""
    return [op, op.removeprefix(f"{cluster}/")] if op.startswith(f"{cluster}/") else [op]


def xla_check(trace: Any, modules: list[Module], eager_ops: list[tuple]) -> dict:
    """The trace's XLA claims against XLA's dumped HLO and TF's placement log.

    Per cluster: the module (of the cluster's function) holding the executed instructions;
    every ``trace.xla`` instruction is in it with the same kind; every op's ``xla_op`` and
    every row's ``tf_ops`` are named by that instruction or what it calls; an op the trace
    says no executed instruction named is named by none; every device is the one the log
    says the function ran on; ``xla_time``'s instruction and share; no ``xla_recompile`` or
    ``xla_outside`` for a ``jit_compile`` step of one shape that TF compiled once.
    """
    xla = getattr(trace, "xla", None)
    result: dict[str, Any] = {
        "instructions": 0, "ops_with_instruction": 0, "ops_checked": 0, "hlo_op_names": 0,
        "devices": [0, 0],
        "modules": {}, "disagreements": [], "executed_not_listed": [],
    }  # fmt: skip
    if xla is None or xla.empty:
        result["no_instructions"] = True
        return result
    ran_on = cluster_devices(eager_ops)
    ops = trace.ops[trace.ops["how"].astype(str) == "xla"]
    wrong = result["disagreements"]
    chosen: dict[str, Module] = {}
    for cluster, rows in xla.groupby("cluster", sort=False):
        cluster = str(cluster)
        executed = list(dict.fromkeys(rows["instruction"].astype(str)))
        candidates = [m for m in modules if m.function == cluster]
        # the one holding most of them; of equals, the last compiled (the tool's run's)
        scored = [(sum(i in m.top for i in executed), k) for k, m in enumerate(candidates)]
        module = candidates[max(scored)[1]] if scored else None
        if module is None:
            wrong.append({"cluster": cluster, "what": "module", "tool": cluster, "tf": "none"})
            continue
        chosen[cluster] = module
        same = sum(m.name == module.name for m in modules)
        result["modules"][cluster] = {"module": module.file, "compiled": same}
        # Instructions: each executed one is the module's, with its kind.
        for row in rows.drop_duplicates("instruction").itertuples(index=False):
            result["instructions"] += 1
            hlo = module.top.get(row.instruction)
            if hlo is None:
                wrong.append(_row(cluster, "instruction", row.instruction, "not in the HLO"))
                continue
            if row.kind != hlo.kind:
                wrong.append(_row(cluster, f"kind of {row.instruction}", row.kind, hlo.kind))
            named = module.op_names(row.instruction)
            for op in row.tf_ops:
                if not set(_hlo_names(op, cluster)) & named:
                    wrong.append(_row(cluster, f"tf_ops of {row.instruction}", op, "not named"))
        # Ops: the trace lists every TF op XLA compiled; each xla_op names it; none is left
        # without one that an executed instruction names.
        members = ops[ops["function"].astype(str) == cluster]
        listed = {n for op in members["op"] for n in _hlo_names(op, cluster)}
        compiled = {
            i.op_name for c in module.computations.values() for i in c.values() if i.op_name
        }
        result["hlo_op_names"] += len(compiled - NOT_OPS)
        for name in sorted(compiled - listed - NOT_OPS):
            wrong.append(_row(cluster, "op XLA compiled", "not in trace.ops", name))
        named_by = {i: module.op_names(i) for i in executed if i in module.top}
        for op in members.itertuples(index=False):
            result["ops_checked"] += 1
            names = set(_hlo_names(op.op, cluster))
            if isinstance(op.xla_op, str) and op.xla_op:
                result["ops_with_instruction"] += 1
                if not names & named_by.get(op.xla_op, set()):
                    into = sorted(i for i, n in named_by.items() if names & n)
                    wrong.append(_row(cluster, f"xla_op of {op.op}", op.xla_op, into or "none"))
            else:
                into = sorted(i for i, n in named_by.items() if names & n)
                if into:
                    result["executed_not_listed"].append({"op": op.op, "tf": into})
        # Devices: the log's, for every op of the cluster and every instruction row.
        devices = {_short(d) for d in ran_on.get(cluster, set())}
        placed = [*members[["op", "device"]].values, *rows[["instruction", "device"]].values]
        for what, device in placed:
            result["devices"][1] += 1
            if _short(device) in devices:
                result["devices"][0] += 1
            else:
                wrong.append(_row(cluster, f"device of {what}", device, sorted(devices)))
    result["findings"] = _findings_check(trace, chosen, result)
    return result


def compiler_ir_check(result: dict, text: str, modules: list[Module]) -> dict:
    """The dumped module the check used against TF's own ``experimental_get_compiler_ir``
    (``stage="optimized_hlo"``) of the same function: the same top-level instructions, each
    with the same kind and op_name (a second route to XLA's program, through TF's API)."""
    ir = parse_hlo(text)
    used = {m["module"] for m in result.get("modules", {}).values()}
    dumped = next((m for m in modules if m.file in used and m.function == ir.function), None)
    if dumped is None:
        return {"instructions": 0, "differences": [f"no dumped module of {ir.function}"]}
    differences = [
        f"{name}: dumped {_facts(dumped.top.get(name))}, compiler IR {_facts(ir.top.get(name))}"
        for name in sorted(set(ir.top) | set(dumped.top))
        if _facts(dumped.top.get(name)) != _facts(ir.top.get(name))
    ]
    return {"instructions": len(ir.top), "differences": differences}


def _facts(instruction: Instruction | None) -> tuple[str, str] | None:
    return (instruction.kind, instruction.op_name) if instruction else None


def _row(cluster: str, what: str, tool: Any, tf: Any) -> dict:
    return {"cluster": cluster, "what": what, "tool": str(tool), "tf": str(tf)}


_TOP = re.compile(r"most time in (\S+) (\d+)%")


def _findings_check(trace: Any, chosen: dict[str, Module], result: dict) -> list[dict]:
    """``xla_time`` names the cluster's longest instruction, with its share; a step TF
    compiled once for one shape has no ``xla_recompile``; a jit_compile cluster compiles
    whole, so no ``xla_outside``."""
    problems = []
    xla = trace.xla
    findings = trace.findings
    for finding in findings.itertuples(index=False):
        if finding.kind == "xla_time":
            cluster = re.search(r"cluster (\S+) on", finding.message)
            top = _TOP.search(finding.message)
            if not (cluster and top):
                problems.append({"kind": finding.kind, "problem": "unparsed", "message": ""})
                continue
            rows = xla[xla["cluster"].astype(str) == cluster.group(1)]
            times = rows.groupby("instruction")["duration_us"].sum()
            share = round(100 * float(times.get(top.group(1), 0)) / float(times.sum()))
            module = chosen.get(cluster.group(1))
            if module is None or top.group(1) not in module.top:
                problems.append({"kind": finding.kind, "problem": f"{top.group(1)} not in HLO"})
            longest = times.get(top.group(1), 0) == times.max()  # a tie names either
            if not longest or abs(share - int(top.group(2))) > 1:
                problems.append(
                    {
                        "kind": finding.kind,
                        "problem": f"{top.group(1)} {top.group(2)}%: trace.xla's longest is "
                        f"{times.idxmax()} {round(100 * times.max() / times.sum())}%",
                    }
                )
        elif finding.kind in ("xla_recompile", "xla_outside"):
            compiled = {c: m["compiled"] for c, m in result["modules"].items()}
            problems.append(
                {
                    "kind": finding.kind,
                    "problem": f"on a jit_compile step of one shape, compiled {compiled}",
                    "message": finding.message,
                }
            )
    return problems
