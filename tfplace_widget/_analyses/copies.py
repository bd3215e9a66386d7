"""Why each copy happened: one row per transfer of a trace, with its cause in words.

A copy between host and GPU memory has few causes, and a trace shows enough to name them:

- ``input``: a value fed from the host (``_recv_<placeholder>``, ``_arg_<argument>``) going
  to the device that reads it;
- ``producer_on_host``: the producer ran on a CPU, its consumer on another device;
- ``host_memory_output``: the producer sits on the GPU, but its GPU kernel keeps its output in
  host memory (int32 arithmetic, ``Shape``, int32 ``Const``), and a consumer computing on the
  GPU needs it in device memory: chains of such ops make copies back and forth;
- ``to_host``: a GPU result going to host memory: to the client (a fetch), to an op on a CPU,
  or to a GPU kernel that reads that input from host memory;
- ``cross_device``: between two devices of any other kind (two CPUs, two GPUs).

Per op type (node defs are not needed, so it works on Chrome traces too); uses the graph's
facts when the trace has them. Whether a GPU kernel keeps its output in host memory is
TensorFlow's kernel registry's answer, handed in (``registry``, by default the one the trace's
facts were read with). Pure pandas: no widgets, no TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd

from .._model.devices import parse_device, short_device
from .._model.kernel_registry import KernelRegistry, require_registry
from .._model.trace import PlacementTrace

COPIES_COLUMNS = ["tensor", "src_device", "dst_device", "bytes", "producer", "cause", "reason"]
CAUSES = ("input", "producer_on_host", "host_memory_output", "to_host", "cross_device")

# timeline.py names a copy "edge_<id>_<producer>"; RunMetadata transfers name "<producer>:<slot>".
_EDGE = re.compile(r"^edge_\d+_(?P<producer>.+)$")
_INPUT = re.compile(r"^_(?:recv|arg)_(?P<name>.+?)(?:_\d+)+$")


def producer_of(tensor: str) -> str:
    """The op that produced a transfer's tensor, as the trace names it."""
    match = _EDGE.match(tensor)
    return match["producer"] if match else tensor.rsplit(":", 1)[0]


def explain_copies(trace: PlacementTrace, registry: KernelRegistry | None = None) -> pd.DataFrame:
    """One row per ``trace.transfers`` row: its producer, ``cause`` (see the module) and
    ``reason`` (one sentence). ``registry``: TensorFlow's kernel registry (e.g.
    ``tfplace_widget._tfadapter.registry.REGISTRY``), by default the one the trace's facts were
    read with; asked only about a GPU op's copy to the GPU, and without one that question
    raises :class:`~tfplace_widget._model.kernel_registry.MissingRegistryError`."""
    facts = getattr(trace, "facts", None)

    def host_outputs(op_type: str) -> bool | None:
        found = require_registry(registry, facts, "explain_copies (a GPU op's copy to the GPU)")
        return found.gpu_host_memory_outputs(op_type)

    ops = trace.ops
    first = ops.drop_duplicates("op").set_index("op")
    type_of, device_of = first["type"].to_dict(), first["device"].to_dict()
    rows = []
    for tensor, src, dst, size in zip(
        trace.transfers["tensor"],
        trace.transfers["src_device"],
        trace.transfers["dst_device"],
        trace.transfers["bytes"],
        strict=True,
    ):
        producer = producer_of(tensor)
        cause, reason = _cause(
            producer, src, dst, type_of.get(producer, ""), device_of, host_outputs
        )
        rows.append((tensor, src, dst, size, producer, cause, reason))
    out = pd.DataFrame(rows, columns=COPIES_COLUMNS)
    out["bytes"] = out["bytes"].astype("Int64")
    return out


def _kind(device: str) -> str:
    try:
        return parse_device(device).type or ""
    except ValueError:
        return ""


def _cause(
    producer: str,
    src: str,
    dst: str,
    op_type: str,
    device_of: dict[str, str],
    host_outputs: Callable[[str], bool | None],
) -> tuple[str, str]:
    src_type, dst_type = _kind(src), _kind(dst)
    where = f"{short_device(src)} -> {short_device(dst)}"
    fed = _INPUT.match(producer)
    if fed:
        return "input", (
            f"{fed['name']} is an input fed from the host (a feed or a function argument); "
            f"{short_device(dst)} reads it, so it is copied there ({where})."
        )
    if src_type == "CPU" and dst_type == "GPU":
        if _kind(device_of.get(producer, src)) == "GPU" and host_outputs(op_type):
            return "host_memory_output", (
                f"{producer} ({op_type}) sits on the GPU, but its GPU kernel keeps the output "
                f"in host memory (as for int32 or shape values); an op computing on the GPU "
                f"needs it in device memory ({where}). Where such values come from your own "
                "integer arithmetic, keeping them float32 avoids these round trips; shapes and "
                "counters that TensorFlow makes live in host memory by design."
            )
        return "producer_on_host", (
            f"{producer}{f' ({op_type})' if op_type else ''} ran on {short_device(src)} and an "
            f"op on {short_device(dst)} reads its output ({where})."
        )
    if src_type == "GPU" and dst_type == "CPU":
        return "to_host", (
            f"{producer}'s output goes to host memory ({where}): to the client (a fetched "
            "result), to an op on the CPU, or to a GPU kernel that reads that input from host "
            "memory (int32 and shape arguments)."
        )
    return "cross_device", (
        f"{producer} ran on {short_device(src)} and an op on {short_device(dst)} reads its "
        f"output ({where})."
    )
