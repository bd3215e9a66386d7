"""Kernel facts per node def (issue 12): the same answer as TensorFlow's own kernel lookup.

``TryFindKernelClass`` (TF's ``FindKernelDef`` on a serialized NodeDef with its device set) is
the reference; ``tfplace_widget._tfadapter.kernels`` reads the registered KernelDefs instead
(silent, cached, and it also says which arguments a GPU kernel keeps in host memory).
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import GPU_TRACES

from tfplace_widget._tfadapter.kernels import (
    KernelFacts,
    has_kernel,
    kernel_facts,
    kernel_facts_of,
    op_type_has_kernel,
)


def _base_value(attr: Any) -> Any:
    """A value for an attr the OpDef gives no default: the first allowed one, or a plain one."""
    from tensorflow.core.framework import attr_value_pb2, types_pb2

    value = attr_value_pb2.AttrValue()
    allowed = attr.allowed_values.list
    first_type = allowed.type[0] if len(allowed.type) else types_pb2.DT_FLOAT
    if attr.type == "type":
        value.type = first_type
    elif attr.type == "list(type)":
        value.list.type.append(first_type)
    elif attr.type == "int":
        value.i = max(1, attr.minimum) if attr.has_minimum else 1
    elif attr.type == "string":
        value.s = allowed.s[0] if len(allowed.s) else b""
    elif attr.type == "bool":
        value.b = False
    elif attr.type == "float":
        value.f = 0.0
    elif attr.type == "shape":
        value.shape.unknown_rank = True
    elif attr.type == "func":
        value.func.name = "f"
    else:
        value.list.SetInParent()
    return value


def _node_defs(op_type: str) -> list[Any]:
    """One node def with the OpDef's first allowed values, then one per registered kernel that
    meets exactly that kernel's constraints (so every kernel's attrs are looked up once)."""
    from tensorflow.core.framework import node_def_pb2
    from tensorflow.python.framework import kernels, op_def_registry

    op_def = op_def_registry.get(op_type)
    if op_def is None:
        return []
    list_attrs = {a.name for a in op_def.attr if a.type == "list(type)"}
    base = node_def_pb2.NodeDef(name="n", op=op_type)
    for attr in op_def.attr:
        if not attr.HasField("default_value"):
            base.attr[attr.name].CopyFrom(_base_value(attr))
    made = [base]
    for kernel in kernels.get_registered_kernels_for_op(op_type).kernel:
        node = node_def_pb2.NodeDef()
        node.CopyFrom(base)
        for constraint in kernel.constraint:
            allowed = constraint.allowed_values.list
            kind = next((k for k in ("type", "s", "i", "b") if len(getattr(allowed, k))), None)
            if kind is None:
                continue
            value = getattr(allowed, kind)[0]
            if constraint.name in list_attrs:
                node.attr[constraint.name].list.Clear()
                node.attr[constraint.name].list.type.append(value)
            else:
                setattr(node.attr[constraint.name], kind, value)
        if kernel.label:
            node.attr["_kernel"].s = kernel.label.encode()
        made.append(node)
    return made


def _tf_finds(node: Any, device_type: str) -> bool | None:
    """TensorFlow's own answer; None when TF rejects the node def itself."""
    from tensorflow.core.framework import node_def_pb2
    from tensorflow.python.util import _pywrap_kernel_registry

    probe = node_def_pb2.NodeDef()
    probe.CopyFrom(node)
    probe.device = f"/device:{device_type}:0"
    try:
        return bool(_pywrap_kernel_registry.TryFindKernelClass(probe.SerializeToString()))
    except Exception:
        return None


def test_every_registered_op_type_agrees_with_tensorflows_own_lookup(tf):
    from tensorflow.python.framework import kernels

    op_types = sorted({k.op for k in kernels.get_all_registered_kernels().kernel})
    assert len(op_types) > 1000
    compared: set[str] = set()
    mismatches = []
    outcomes = {"CPU": set(), "GPU": set()}
    for op_type in op_types:
        for node in _node_defs(op_type):
            facts = kernel_facts(node)
            for device_type in ("CPU", "GPU"):
                expected = _tf_finds(node, device_type)
                if expected is None:
                    continue
                compared.add(op_type)
                outcomes[device_type].add(expected)
                if facts.has(device_type) != expected:
                    mismatches.append((op_type, device_type, expected, dict(node.attr)))
    assert not mismatches, mismatches[:10]
    # At least one node def of (almost) every op type was judged by TF, both ways.
    assert len(compared) >= 0.95 * len(op_types), len(compared)
    assert outcomes == {"CPU": {True, False}, "GPU": {True, False}}


def test_the_batch_lookup_gives_each_node_its_own_facts(tf, monkeypatch):
    """``kernel_facts_of`` (graph facts' path) equals ``kernel_facts`` node by node, on node
    defs of every registered op type mixed in one list, its cache empty and then full."""
    from tensorflow.python.framework import kernels

    from tfplace_widget._tfadapter import kernels as kernels_module

    op_types = sorted({k.op for k in kernels.get_all_registered_kernels().kernel})
    nodes = [node for op_type in op_types for node in _node_defs(op_type)]
    nodes = nodes[1::2] + nodes[::2]  # op types interleaved, not grouped
    expected = [kernel_facts(node) for node in nodes]
    monkeypatch.setattr(kernels_module, "_cache", {})
    for _ in range(2):  # misses, then hits
        got = kernel_facts_of(nodes, [n.op for n in nodes], [n.attr for n in nodes])
        assert got == expected
    assert len({f.kernels for f in got}) > 2 and len({f.gpu_kernel for f in got}) > 2


def _facts_of(tf: Any, build: Any) -> dict[str, KernelFacts]:
    graph = tf.Graph()
    with graph.as_default():
        build()
    return {op.name: kernel_facts(op.node_def) for op in graph.get_operations()}


def test_the_classic_cases_by_dtype_not_by_op_type(tf):
    def build() -> None:
        ints = tf.constant([[1, 2], [3, 4]], name="ints")
        floats = tf.cast(ints, tf.float32, name="floats")
        tf.matmul(ints, ints, name="int_matmul")
        tf.matmul(floats, floats, name="float_matmul")
        tf.add(ints, ints, name="int_add")
        tf.add(tf.constant("a"), tf.constant("b"), name="string_add")
        tf.strings.join(["a", "b"], name="join")
        tf.reshape(floats, [4], name="reshape")
        tf.compat.v1.py_func(lambda x: x, [floats], tf.float32, name="py")
        tf.no_op(name="noop")

    facts = _facts_of(tf, build)
    assert facts["float_matmul"] == KernelFacts("CPU GPU", "yes", attrs="T=float32")
    assert facts["int_matmul"] == KernelFacts("CPU", "dtype", attrs="T=int32")
    assert facts["int_matmul"].dtypes == "int32"
    assert facts["string_add"].gpu_kernel == "dtype" and facts["string_add"].kernels == "CPU"
    assert facts["join"] == KernelFacts("CPU", "no")
    assert facts["py"] == KernelFacts("CPU", "no", attrs=facts["py"].attrs)
    # int32 AddV2 and Const: "GPU" kernels that keep every argument in host memory.
    assert facts["int_add"] == KernelFacts("CPU GPU", "host", (0, 1), (0,), "T=int32")
    assert facts["ints"].gpu_kernel == "host" and facts["ints"].gpu_host_outputs == (0,)
    # Reshape's shape input lives on the host; the data does not: a real GPU kernel.
    assert facts["reshape"].gpu_kernel == "yes" and facts["reshape"].gpu_host_inputs == (1,)
    # NoOp has only a DEFAULT kernel, which serves CPU and GPU alike.
    assert facts["noop"].kernels == "CPU GPU" and facts["noop"].gpu_kernel == "yes"


def test_default_kernels_serve_every_type_but_the_jit_ones(tf):
    """DEFAULT serves CPU, GPU, XLA_*, TPU, even a made-up type, but not XLA's JIT types (TF's
    "symbolic execution devices"; which kernels XLA registers for them depends on whether
    something was compiled in this process, so only the made-up types are compared here)."""
    graph = tf.Graph()
    with graph.as_default():
        node = tf.no_op(name="noop").node_def
    for device_type in ("CPU", "GPU", "XLA_CPU", "TPU", "MADE_UP", "MADE_UP_JIT"):
        assert has_kernel(node, device_type) == _tf_finds(node, device_type) is True
    assert op_type_has_kernel("NoOp", "TPU")
    assert op_type_has_kernel("NoSuchOpType", "GPU") is None


def test_the_ops_frame_has_kernel_columns_in_graph_mode(seed_cpu):
    ops = seed_cpu.ops.set_index("op")
    assert ops.loc["C", "kernels"] == "CPU GPU" and ops.loc["C", "gpu_kernel"] == "yes"
    # Runtime-made nodes have no node def in the graph as built: unknown, not guessed.
    runtime = ops[
        ops["type"].isin(["_Send", "_Recv", "_Retval", "NoOp"]) & (ops["how"] == "runtime")
    ]
    assert len(runtime) and set(runtime["gpu_kernel"]) == {"NA"}
    assert set(runtime["kernels"]) == {""}


def test_the_ops_frame_has_kernel_columns_in_function_mode(tf, trace_placement):
    @tf.function
    def step(x: Any) -> Any:
        label = tf.strings.join(["x", "y"], name="label")
        counts = tf.matmul(tf.cast(x, tf.int32), tf.cast(x, tf.int32), name="int_matmul")
        return tf.matmul(x, x, name="float_matmul"), counts, label

    trace = trace_placement(step, tf.ones((2, 2)), mode="function")
    assert trace.mode == "function"
    ops = trace.ops.set_index("op")
    assert ops.loc["float_matmul", ["kernels", "gpu_kernel"]].tolist() == ["CPU GPU", "yes"]
    assert ops.loc["int_matmul", ["kernels", "gpu_kernel"]].tolist() == ["CPU", "dtype"]
    assert ops.loc["label", ["kernels", "gpu_kernel"]].tolist() == ["CPU", "no"]


def test_a_soft_move_off_a_gpu_request_names_the_dtype(tf, trace_placement):
    def build() -> Any:
        ints = tf.constant([[1, 2], [3, 4]], name="ints")
        with tf.device("/gpu:0"):
            return tf.matmul(ints, ints, name="int_matmul")

    trace = trace_placement(build, soft_placement=True)
    row = trace.ops.set_index("op").loc["int_matmul"]
    assert row["how"] == "soft"
    # No GPU here, and none would help: the reason says both.
    assert "which does not exist here" in row["reason"]
    assert "would not run there either: MatMul has no GPU kernel for int32" in row["reason"]


def test_a_placed_op_beside_a_gpu_without_a_kernel_for_its_dtype(tf):
    """On a GPU machine (devices as a GPU trace lists them), the reason names the dtype."""
    from helpers import CPU0, GPU0

    from tfplace_widget._explain.run import Explainer
    from tfplace_widget._tfadapter.graphfacts import facts_from_graph

    graph = tf.Graph()
    with graph.as_default():
        ints = tf.constant([[1, 2], [3, 4]], name="ints")
        tf.matmul(ints, ints, name="int_matmul")
        with tf.device("/gpu:0"):
            tf.matmul(ints, ints, name="asked_gpu")
    placed = {"ints": GPU0, "int_matmul": CPU0, "asked_gpu": CPU0}
    explainer = Explainer(facts_from_graph(graph), placed, [CPU0, GPU0], {})
    _, how, reason = explainer.explain("int_matmul", "MatMul", CPU0)
    assert how == "implicit"
    assert "MatMul has no GPU kernel for int32, so the placer chose the CPU" in reason
    _, how, reason = explainer.explain("asked_gpu", "MatMul", CPU0)
    assert how == "soft" and "but MatMul has no GPU kernel for int32" in reason


def test_every_op_that_ran_on_a_gpu_in_the_real_traces_has_a_gpu_kernel():
    """The vendored GPU traces have no node defs, so the check is per op type: whatever ran on a
    GPU must be of a type with a GPU (or DEFAULT) kernel here, and the column makes no guess."""
    from tfplace_widget import PlacementTrace

    checked = 0
    for path in sorted(GPU_TRACES.rglob("*.json")):
        trace = PlacementTrace.from_chrome_trace(path)
        assert set(trace.ops["gpu_kernel"]) <= {"NA"}
        on_gpu = trace.ops[trace.ops["device"].str.contains("GPU") & (trace.ops["type"] != "")]
        for op_type in set(on_gpu["type"]):
            known = op_type_has_kernel(op_type, "GPU")
            assert known is not False, f"{path.name}: {op_type} ran on a GPU"
            checked += known is True
    assert checked > 50


def test_xla_compilation_kernels_are_read_from_the_registry(tf):
    """Issue 30: what XLA can compile for a GPU (``XLA_GPU_JIT``) is in TensorFlow's kernel
    registry once XLA registered its compilation kernels (the CPU wheel has the GPU ones too),
    checked against XLA itself compiling the same ops here (``XLA_CPU_JIT``)."""
    from tfplace_widget._tfadapter.kernels import has_xla_kernel
    from tfplace_widget._tfadapter.registry import registered_kernels

    graph = tf.Graph()
    with graph.as_default():
        words, numbers = tf.constant(["a"]), tf.constant([1.0])
        tf.identity(words, name="words")
        tf.strings.join([words, words], name="joined")
        tf.identity(numbers, name="numbers")
        tf.matmul([[1.0]], [[2.0]], name="product")
    node = {op.name: op.node_def for op in graph.get_operations()}
    assert has_xla_kernel(node["numbers"]) and has_xla_kernel(node["product"])
    assert not has_xla_kernel(node["words"])  # Identity has XLA kernels, none for strings
    assert not has_xla_kernel(node["joined"])  # StringJoin has none at all
    # The kernel facts stay those of the placer's device types, whatever XLA registered.
    assert not {k.device_type for k in registered_kernels("MatMul").kernels} & {
        "XLA_CPU_JIT",
        "XLA_GPU_JIT",
    }

    @tf.function(jit_compile=True)
    def strings(x):
        return tf.identity(x)

    @tf.function(jit_compile=True)
    def floats(x):
        return tf.identity(x)

    floats(tf.constant([1.0]))  # compiles and runs
    with pytest.raises(tf.errors.InvalidArgumentError, match="Detected unsupported operations"):
        strings(tf.constant(["a"]))


def test_the_registry_answers_every_question_the_analyses_ask():
    """``tfadapter.registry.REGISTRY``, handed to the analyses, answers each question of
    ``model.kernel_registry.KernelRegistry`` with the same parameters, from TensorFlow's
    registries (issue 32)."""
    import inspect

    from tfplace_widget._model.kernel_registry import KernelRegistry
    from tfplace_widget._tfadapter.registry import REGISTRY

    questions = [n for n, v in vars(KernelRegistry).items() if callable(v) and n[0] != "_"]
    assert len(questions) == 7, questions
    for name in questions:
        asked = inspect.signature(getattr(KernelRegistry, name)).parameters
        answered = inspect.signature(getattr(type(REGISTRY), name)).parameters
        assert list(asked) == list(answered), name
    assert REGISTRY.op_outputs("VarHandleOp") == (1, True, False)
    assert REGISTRY.is_ref_output("VariableV2") and not REGISTRY.is_ref_output("VarHandleOp")
    assert REGISTRY.gpu_host_memory_outputs("Shape") is True
    assert REGISTRY.gpu_host_memory_outputs("NoSuchOpType") is None
    assert {"CPU", "GPU"} <= REGISTRY.registered_device_types("MatMul")
    assert "GPU" not in REGISTRY.registered_device_types("StringJoin")
    assert set(REGISTRY.device_type_priorities("MatMul")) >= {"CPU", "GPU"}
