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
