"""TensorFlow's protobuf classes and dtype names, for the readers that parse recorded bytes.

Each accessor imports the proto module it needs when called (the first call imports
TensorFlow, as reading a ``RunMetadata`` always has): a reader of a ``.tfplace`` file that
needs none of them never imports TensorFlow.
"""

from __future__ import annotations

from typing import Any


def run_metadata_type() -> Any:
    """``tensorflow.core.protobuf.config_pb2.RunMetadata``."""
    from tensorflow.core.protobuf import config_pb2

    return config_pb2.RunMetadata


def config_proto_type() -> Any:
    """``tensorflow.core.protobuf.config_pb2.ConfigProto``."""
    from tensorflow.core.protobuf import config_pb2

    return config_pb2.ConfigProto


def graph_def_type() -> Any:
    """``tensorflow.core.framework.graph_pb2.GraphDef`` (``tf.compat.v1.GraphDef``)."""
    from tensorflow.core.framework import graph_pb2

    return graph_pb2.GraphDef


def hlo_proto_type() -> Any:
    """XLA's ``HloProto`` (``tensorflow.compiler.xla.service.hlo_pb2``)."""
    from tensorflow.compiler.xla.service import hlo_pb2

    return hlo_pb2.HloProto


def xplane_descriptor() -> Any:
    """The file descriptor of the profiler's ``xplane.proto`` (XSpace, XPlane, XEvent...)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return xplane_pb2.DESCRIPTOR


def dtype_name(enum: int) -> str:
    """TensorFlow's name of a ``DataType`` enum value ("int32", "float32_ref"); ``TypeError``
    for a value that is no dtype."""
    from tensorflow.python.framework import dtypes

    return dtypes.as_dtype(enum).name


def dtype_size(enum: int) -> int:
    """The bytes of one element of the ``DataType`` enum value (TensorFlow's ``dtype.size``;
    a ``_ref`` type's base type's), 0 for a type without a fixed size (string, resource,
    variant) or a value that is no dtype."""
    from tensorflow.python.framework import dtypes

    try:
        dtype = dtypes.as_dtype(enum).base_dtype
    except TypeError:
        return 0
    if dtype in (dtypes.string, dtypes.resource, dtypes.variant):
        return 0
    try:
        return int(dtype.size)
    except (TypeError, ValueError):
        return 0


def allocator_columns_type() -> Any:
    """A message class that reads a serialized ``RunMetadata``'s allocator records as
    columns: wire-compatible with ``RunMetadata.step_stats`` but declaring each nested
    ``dev_stats`` and ``node_stats`` as a singular message, so that parsing merges every
    occurrence into one: ``step_stats.dev_stats.node_stats`` then has ``memory``, every
    node's ``AllocatorMemoryUsed`` items as their serialized bytes (declared ``repeated
    bytes``: one ``bytes`` per item, in the order of the bytes, which is the order the
    step_stats are iterated in), and ``memory_stats.persistent_memory_size`` of every node,
    flat, and every node's outputs' ``tensor_description.allocation_description.requested_bytes``,
    flat. Every other field is skipped by the parser (kept as unknown bytes), so the parse
    costs a few ms per 10 MB in C, where reading the same records field by field from Python
    costs about 1.8 µs per node. The items' bytes, joined, parse as one
    :func:`allocator_item_columns_type`; how many allocation records each item holds is
    counted from its bytes (``_sources.wire``)."""
    return _column_classes()["Run"]


def allocator_item_columns_type() -> Any:
    """A message class wire-compatible with ``AllocatorMemoryUsed`` whose
    ``allocation_records`` is declared a singular message and each scalar repeated: the
    joined bytes of many items parse as one, each scalar a list of every item's (or every
    record's: ``alloc_micros``, ``alloc_bytes``) values in order. What it cannot say: which
    item each value belongs to, and a field equal to zero is absent from the bytes (proto3),
    so a column may be shorter than the items: the reader checks every column's length."""
    return _column_classes()["Allocator"]


def _column_classes() -> dict[str, Any]:
    """The column classes by name, made once (their own descriptor pool)."""
    global _COLUMN_CLASSES
    if _COLUMN_CLASSES is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        field = descriptor_pb2.FieldDescriptorProto
        file = descriptor_pb2.FileDescriptorProto(
            name="tfplace_allocator_columns.proto", package="tfplace_columns", syntax="proto2"
        )
        layout = {  # message: (field, number, scalar type or the message it holds)
            "Run": [("step_stats", 1, "Steps")],
            "Steps": [("dev_stats", 1, "Device")],
            "Device": [("node_stats", 2, "Node")],
            "Node": [
                ("memory", 6, field.TYPE_BYTES),
                ("output", 7, "Output"),
                ("memory_stats", 12, "MemoryStats"),
            ],
            "Output": [("tensor_description", 3, "TensorDescription")],
            "TensorDescription": [("allocation_description", 4, "AllocationDescription")],
            "AllocationDescription": [("requested_bytes", 1, field.TYPE_INT64)],
            "MemoryStats": [("persistent_memory_size", 3, field.TYPE_INT64)],
            "Allocator": [
                ("allocator_name", 1, field.TYPE_STRING),
                ("total_bytes", 2, field.TYPE_INT64),
                ("peak_bytes", 3, field.TYPE_INT64),
                ("allocation_records", 6, "Record"),
            ],
            "Record": [("alloc_micros", 1, field.TYPE_INT64), ("alloc_bytes", 2, field.TYPE_INT64)],
        }
        for name, fields in layout.items():
            message = file.message_type.add(name=name)
            for field_name, number, kind in fields:
                added = message.field.add(name=field_name, number=number)
                if isinstance(kind, str):
                    added.type, added.label = field.TYPE_MESSAGE, field.LABEL_OPTIONAL
                    added.type_name = f".tfplace_columns.{kind}"
                else:
                    added.type, added.label = kind, field.LABEL_REPEATED
        pool = descriptor_pool.DescriptorPool()
        pool.Add(file)
        _COLUMN_CLASSES = {
            name: message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"tfplace_columns.{name}")
            )
            for name in ("Run", "Allocator")
        }
    return _COLUMN_CLASSES


_COLUMN_CLASSES: dict[str, Any] | None = None
