"""What a ``.tfplace`` file holds: its members, and the names and version the reader and the
writer share.

The format (version 3) is a zip archive (deflate) of plain documents and typed arrays, readable
with any zip tool, a JSON parser and ``numpy.frombuffer``, and safe to open: nothing in it is
executed or unpickled, members are read by name into memory (never extracted to disk) within
the size limits of ``sources.limits`` and ``tfplace_format.limits``, and every field is
type-checked on load (the frames against ``tfplace_format.schema``).

=============================  ================================================================
member                         what it holds
=============================  ================================================================
``tfplace.json``               the manifest: ``format`` ("tfplace_widget trace"), ``version``,
                               the writer's version, and the trace's small fields
                               (``devices``, ``source``, ``mode``, ``mode_reason``,
                               ``truncated``, ``predicted``, ``notes``) and the list of ``raw``
                               members with their proto type
``frames/<frame>.json``        a frame, column by column: each column's name and dtype, and
                               where its values are (``frame_arrays``); the frames are
                               ``FRAMES`` (``ops``, ``events``, ``transfers``) and, when the
                               trace has them, ``OPTIONAL_FRAMES``: ``xla`` (the HLO
                               instructions XLA ran; a file without it loads with an empty
                               one and ``xla_op`` missing), ``measured`` (a prediction's: the
                               op runs of the trace it was predicted from), ``memory``
                               (TensorFlow's allocator records, when it has rows; a file
                               without it loads with an empty one and the ops' memory columns
                               missing) and ``findings`` (when computed; read back only by the
                               version that wrote it)
``frames/<frame>/<i>.<part>``  column ``i``'s values: ``.values`` (numbers, little-endian, in
                               byte planes), ``.missing`` (a bit per row), ``.codes`` (indexes
                               into ``.strings``, the column's distinct strings joined by NUL,
                               or into a category's categories); objects that are not text (a
                               finding's evidence and fix) stay JSON in the frame's document
``maps.json``                  ``trace.inputs`` (op -> producers) and the facts' per-op maps
                               (op -> type, device requested, inputs, kernel row, ...), each
                               as arrays ``maps/<i>.<part>`` of codes into one dictionary of
                               names, ``maps/strings`` (``map_arrays``)
``log.txt``                    ``trace.log`` (UTF-8)
``facts.json``                 ``trace.facts`` field by field (``facts_json``), when present,
                               but for the per-op maps in ``maps.json``
``raw/<name>``                 ``trace.raw``: the protos the trace was made from (graph mode:
                               ``run_metadata_<step>.pb`` and ``graph_def.pb``; TF2 code:
                               ``xspace.pb``, ``function_graphs.pb`` and ``functions.json``),
                               kept as they were for a later version to re-derive columns from;
                               one past the limits a file is opened with is left out on save,
                               and the trace's notes say so
=============================  ================================================================

Version 1 wrote each frame as one JSON document with its values inline (``frame_json``): a
1M-op trace's ``frames/ops.json`` took over 256 MiB, past the member limit, and saving it was
refused. Version 2 wrote the frames as typed arrays (a text column's strings a JSON list), and
``trace.inputs`` and all of the facts as JSON (``inputs.json``, ``facts.json``): most of the
time of saving and loading 1M ops. Version 3 reads both (a column's values may be inline JSON,
a dictionary a JSON list, and a file without ``maps.json`` has ``inputs.json`` and the facts'
maps in ``facts.json``), and older versions refuse version 3 with the upgrade to install. Typed arrays and not Parquet: a shared file must
open wherever tfplace_widget is installed, and pyarrow is optional. A reader refuses a newer
``version`` (with the upgrade to install), and ignores members and manifest keys it does not
know, so additions within a version stay readable by older readers. A new frame needs a name
in ``FRAMES`` or ``OPTIONAL_FRAMES`` and its columns in ``schema``.
"""

from __future__ import annotations

import re

FORMAT = "tfplace_widget trace"
FORMAT_VERSION = 3
SUFFIX = ".tfplace"
MANIFEST = "tfplace.json"
# The frames every file has, and those it has when the trace has them (``writer``): a new
# frame is named here, and its columns in ``schema``.
FRAMES = ("ops", "events", "transfers")
OPTIONAL_FRAMES = ("xla", "memory", "measured", "findings")
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
