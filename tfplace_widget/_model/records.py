"""The common form every trace source is reduced to before frames are built."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from .devices import canonical_device


@dataclass
class Records:
    """Flat, column-wise execution records, the common form of every trace source."""

    op: list = field(default_factory=list)
    type: list = field(default_factory=list)
    lane: list = field(default_factory=list)
    thread: list = field(default_factory=list)
    start: list = field(default_factory=list)
    duration: list = field(default_factory=list)
    label: list = field(default_factory=list)
    output_bytes: list = field(default_factory=list)
    # TensorFlow's allocator records (graph mode's ``NodeExecStats.memory``); not columns:
    # most records have none.
    memory: AllocatorRecords = field(default_factory=lambda: AllocatorRecords())
    # What kernels recorded as persistent (``memory_stats.persistent_memory_size``: a Const's
    # value, a ref variable's buffer): (op, lane) -> (bytes, allocator, record), the largest of
    # its runs, ``record`` that run's position in these records
    persistent: dict = field(default_factory=dict)

    def append(
        self, op: str, op_type: str, lane: str, thread: int, start: int, duration: int, label: str
    ) -> None:
        """Add one execution record (no output sizes)."""
        self.op.append(op)
        self.type.append(op_type)
        self.lane.append(lane)
        self.thread.append(thread)
        self.start.append(start)
        self.duration.append(duration)
        self.label.append(label)
        self.output_bytes.append(())

    def keep(self, rows: list[int]) -> None:
        """Keep only the records at ``rows``, in that order."""
        for column in fields(self):
            if column.name not in ("memory", "persistent"):
                values = getattr(self, column.name)
                setattr(self, column.name, [values[i] for i in rows])
        moved = {old: new for new, old in enumerate(rows)}
        if self.memory.row:
            self.memory.keep(moved)
        self.persistent = {  # a run's record moved, or gone (-1: its op row found by name)
            key: (held, allocator, moved.get(record, -1))
            for key, (held, allocator, record) in self.persistent.items()
        }


@dataclass
class AllocatorRecords:
    """What the ops' tracking allocators recorded, column-wise: one item per (execution
    record, allocator), and its allocation records (allocations > 0, frees < 0) flat, in item
    order (``count`` of them per item)."""

    row: list = field(default_factory=list)  # the execution record's index in ``Records``
    step: list = field(default_factory=list)  # a key shared by the items of one traced step
    allocator: list = field(default_factory=list)  # TensorFlow's name, e.g. "GPU_0_bfc"
    peak: list = field(default_factory=list)  # AllocatorMemoryUsed.peak_bytes
    total: list = field(default_factory=list)  # AllocatorMemoryUsed.total_bytes
    count: list = field(default_factory=list)  # its allocation records
    time: list = field(default_factory=list)  # each allocation record's alloc_micros
    bytes: list = field(default_factory=list)  # and alloc_bytes
    # Every allocation of every op (graph mode's tracking allocators), or only those of the
    # allocators that report to TensorFlow's profiler (a TF2 profile): then an op with no
    # item allocated nothing that was recorded, which is not "nothing".
    every_allocation: bool = True
    # A TF2 profile's allocations no traced op owns, and their frees: (profiler line, time,
    # allocator, address, bytes signed), in time order; an XLA program's buffers are among them
    unowned: list = field(default_factory=list)

    def keep(self, moved: dict[int, int]) -> None:
        """Keep the items of the execution records in ``moved`` (old row -> new row)."""
        kept = AllocatorRecords()
        at = 0
        for i, row in enumerate(self.row):
            count = self.count[i]
            if row in moved:
                kept.row.append(moved[row])
                for name in ("step", "allocator", "peak", "total", "count"):
                    getattr(kept, name).append(getattr(self, name)[i])
                kept.time += self.time[at : at + count]
                kept.bytes += self.bytes[at : at + count]
            at += count
        kept.every_allocation = self.every_allocation
        kept.unowned = self.unowned
        for name in kept.__dataclass_fields__:
            setattr(self, name, getattr(kept, name))


class BuiltAt(NamedTuple):
    """The innermost frame of the user's own code on the Python stack that made an op."""

    path: str  # the file, as Python named it (absolute for a module, ``<stdin>``...)
    line: int
    function: str  # the function (``<module>`` at a file's top level)


class HandedVariable(NamedTuple):
    """The variable a traced call's input hands out (its resource handle): ``identity`` the
    same for every input given that variable's handle, ``name`` the variable's as TensorFlow
    names it ("" when not known), ``bytes`` its shape's elements times its dtype's size (0 when
    not known)."""

    identity: str
    name: str
    bytes: int = 0


@dataclass
class Executed:
    """The executed graph (from partition graphs): node -> device, type, inputs; transfers.

    ``function`` names the tf.function (or Keras call) each node belongs to, in function mode.
    ``fused`` names what a fused kernel (``_FusedMatMul``...) replaced, when TF recorded it;
    ``merged`` the placed ops oneDNN's rewrite merged into a kernel after placement;
    ``replicated`` the constants ReplicateConstantsPass replaced by per-device copies.
    """

    device: dict[str, str] = field(default_factory=dict)
    type: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, list[str]] = field(default_factory=dict)
    transfers: list[tuple[str, str, str]] = field(default_factory=list)
    function: dict[str, str] = field(default_factory=dict)
    # node -> the ops Grappler's remapper fused into it (its ``fused_ops`` attr)
    fused: dict[str, list[str]] = field(default_factory=dict)
    # placed op -> the oneDNN kernel it ran inside (sources.onednn): no record of its own
    merged: dict[str, str] = field(default_factory=dict)
    # placed constant -> its per-device copies (sources.replicated): it has a row (with no
    # record) only where the placement log gives its device
    replicated: dict[str, list[str]] = field(default_factory=dict)
    # the client's device (where a cluster's fetches and feeds end), "" when not recorded
    client: str = ""
    # node -> the bytes of the resource variables it hands out (``sources.persistent``): a
    # VarHandleOp's, a function's resource _Arg's; held on its device through every step
    variables: dict[str, int] = field(default_factory=dict)
    # node (of ``variables``) -> the variable it hands out, the same for two handles of one
    # variable (a graph's VarHandleOps of one resource, two functions' _Args given one handle):
    # held once per device. A node missing here is a variable of its own.
    variable_of: dict[str, str] = field(default_factory=dict)
    # node (of ``variables``) -> the name of the variable it hands out, as TensorFlow names it
    # (``tf.Variable.name`` less ":0"; a graph's VarHandleOp: its own name); none when unknown
    variable_name: dict[str, str] = field(default_factory=dict)
    # node -> where the user's code made it (``tfadapter.origins``); None: made by code but no
    # frame of the user's recorded. Empty when the trace did not record sources; otherwise a
    # node missing here was added by TensorFlow's runtime (_Send, _Recv, copies, Grappler).
    built_at: dict[str, BuiltAt | None] = field(default_factory=dict)
    # function mode: node -> (its FunctionDef's name, its node def's name there), from which
    # the tracer reads ``built_at`` (the FunctionDef name None where it is not known)
    made_by: dict[str, tuple[str | None, str]] = field(default_factory=dict)


SEND_TYPES = ("_Send", "_HostSend")


def send_transfer(node: Any) -> tuple[str, str, str]:
    """``(tensor, src_device, dst_device)`` of a ``_Send`` node of a partition graph; the
    tensor as ``name:slot``, the devices canonical."""
    attr = node.attr
    tensor = node.input[0] if node.input else attr["_src"].s.decode()
    return (
        tensor if ":" in tensor else f"{tensor}:0",
        canonical_device(attr["send_device"].s.decode()),
        canonical_device(attr["recv_device"].s.decode()),
    )


def producer(tensor_name: str) -> str:
    """``"a/b:1"`` -> ``"a/b"``."""
    head, sep, tail = tensor_name.rpartition(":")
    return head if sep and tail.isdigit() else tensor_name


def producers(inputs: list[str]) -> list[str]:
    """Data inputs (``"^ctrl"`` dropped) as producer op names; ``inputs`` is a fresh list."""
    if inputs:
        joined = "".join(inputs)  # one C-level scan; most nodes need no per-input work
        if ":" in joined or "^" in joined:
            return [i if ":" not in i else producer(i) for i in inputs if i[:1] != "^"]
    return inputs
