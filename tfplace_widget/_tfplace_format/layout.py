"""What a ``.tfplace`` file holds: its members, and the names and version the reader and the
writer share.

The format (version 1) is a zip archive (deflate) of plain documents, readable with any zip
tool and a JSON parser, and safe to open: nothing in it is executed or unpickled, members are
read by name into memory (never extracted to disk) within the size limits of
``sources.limits`` and ``tfplace_format.limits``, and every field is type-checked on load (the
frames against ``tfplace_format.schema``).

========================  =====================================================================
member                    what it holds
========================  =====================================================================
``tfplace.json``          the manifest: ``format`` ("tfplace_widget trace"), ``version``, the
                          writer's version, and the trace's small fields (``devices``,
                          ``source``, ``mode``, ``mode_reason``, ``truncated``, ``predicted``,
                          ``notes``) and the list of ``raw`` members with their proto type
``frames/ops.json``       ``trace.ops``, column-wise, with each column's dtype (``frame_json``)
``frames/events.json``    ``trace.events``
``frames/transfers.json`` ``trace.transfers``
``frames/xla.json``       ``trace.xla`` (the HLO instructions XLA ran); files written before it
                          have none, and load with an empty ``xla`` and ``xla_op`` missing
``frames/measured.json``  a prediction's ``trace.measured`` (the op runs of the trace it was
                          predicted from, for its findings' materiality), when it has one
``frames/findings.json``  ``trace.findings``, when it had been computed (the panel computes it);
                          read back only by the version that wrote it (others find them again)
``inputs.json``           ``trace.inputs`` (op -> producers)
``log.txt``               ``trace.log`` (UTF-8)
``facts.json``            ``trace.facts`` field by field (``facts_json``), when present
``raw/<name>``            ``trace.raw``: the protos the trace was made from (graph mode:
                          ``run_metadata_<step>.pb`` and ``graph_def.pb``; TF2 code:
                          ``xspace.pb``, ``function_graphs.pb`` and ``functions.json``), kept
                          as they were for a later version to re-derive columns from
========================  =====================================================================

JSON and not Parquet: a shared file must open wherever tfplace_widget is installed, and
pyarrow is optional. Column-wise JSON of a 100k-op trace deflates to a few MB and round-trips
every dtype exactly. A reader refuses a newer ``version`` (with the upgrade to install), and
ignores members and manifest keys it does not know, so additions within a version stay
readable by older readers.
"""

from __future__ import annotations

import re

FORMAT = "tfplace_widget trace"
FORMAT_VERSION = 2
SUFFIX = ".tfplace"
MANIFEST = "tfplace.json"
# The frames every file has, and those it has when the trace has them (``writer``): a new
# frame is named here, and its columns in ``schema``.
FRAMES = ("ops", "events", "transfers")
OPTIONAL_FRAMES = ("xla", "measured", "findings")
# Proto type of each raw member a tracer writes, for a reader that wants to parse it.
RAW_TYPES = {
    "graph_def.pb": "tensorflow.GraphDef",
    "xspace.pb": "tensorflow.profiler.XSpace",
    "function_graphs.pb": "tensorflow.RunMetadata (function_graphs only)",
    "functions.json": "JSON: display name of each function graph, device_scope",
    "keras_xla.json": "JSON: how Keras 3 would compile the traced Keras step on a GPU",
}
RAW_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")


def raw_type(name: str) -> str:
    """The proto type of a raw member, by its name."""
    if name.startswith("run_metadata"):
        return "tensorflow.RunMetadata"
    return RAW_TYPES.get(name, "bytes")
