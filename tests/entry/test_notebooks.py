"""The teaching notebooks run headless, top to bottom, and show what they say they show.

All the notebooks execute once per test session, *concurrently* (one kernel each, driven by
nbclient's async API in one event loop), with the notebooks folder as the working directory, as
in JupyterLab. Each test then reads the executed notebook: no cell errored, the placement panel
was displayed (a widget view whose model is in the saved widget state), the file stays within its
size budget, and the key facts the markdown states are in the outputs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import time
from dataclasses import dataclass

import nbformat
import pytest
from helpers import REPO, kernels_forward_native_output, needs_source_tree
from nbclient import NotebookClient

pytestmark = needs_source_tree  # the notebooks are in the checkout, not in the wheel
NOTEBOOKS = REPO / "notebooks"
NAMES = [
    "01_seed_experiment.ipynb",
    "02_explicit_and_implicit.ipynb",
    "03_finding_one_op.ipynb",
    "04_real_gpu_trace.ipynb",
    "05_tf2_functions_and_keras.ipynb",
    "06_will_it_run_on_the_gpu.ipynb",
    "07_parameter_servers.ipynb",
    "08_from_finding_to_fix.ipynb",
    "09_memory.ipynb",
]
KERNEL = "python3"
CELL_TIMEOUT_S = 120  # one cell; the slowest (a trace, TF import) takes a few seconds
STARTUP_TIMEOUT_S = 120
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Size budgets, measured with TF 2.21, plotly 7.1, anywidget 0.11 on a machine without a GPU.
# - Without the widget state, the executed notebooks are 20-50 KB (DataFrames as text and HTML,
#   a few printed lines). 1 MB leaves ample room for a GPU machine's longer device lists and
#   still catches a runaway output (a full op table, TensorFlow's log dumped into a cell).
# - nbclient stores the widget state in the notebook's metadata (as `jupyter nbconvert
#   --execute` does). Most of it is plotly.js, stored once per notebook: the kernel's one
#   PlotlyBundle widget carries it gzipped (1.5 MB, 2.0 MB as base64 in the file;
#   tfplace_widget/bundle_holder.py), and each timeline holds only its small module. The executed
#   notebooks are 2.15-2.38 MB (one to three panels of ~0.1 MB each; 05 has three: 2.38 MB,
#   48 KB without the widget state); 3 MB is that plus ~25%. With
#   the bundle in every figure's `_esm` again (5 MB each, as plain plotly sends it) or sent twice,
#   a notebook fails the budget.
MAX_BYTES_WITHOUT_WIDGET_STATE = 1_000_000
MAX_BYTES = 3_000_000


@dataclass
class Executed:
    name: str
    notebook: nbformat.NotebookNode | None
    seconds: float
    error: BaseException | None = None

    @property
    def text(self) -> str:
        """Every text output (streams, text/plain results, error values), joined."""
        parts = []
        for cell in self.notebook.cells:
            for output in cell.get("outputs", []):
                if output.output_type == "stream":
                    parts.append(output.text)
                elif output.output_type in ("execute_result", "display_data"):
                    parts.append(output.data.get("text/plain", ""))
                elif output.output_type == "error":
                    parts.append(f"{output.ename}: {output.evalue}")
        return "\n".join(parts)


async def _execute(name: str) -> Executed:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout=CELL_TIMEOUT_S,
        startup_timeout=STARTUP_TIMEOUT_S,
        allow_errors=True,  # keep running: the test reports every failing cell at once
        resources={"metadata": {"path": str(NOTEBOOKS)}},  # cwd = notebooks/, as in JupyterLab
    )
    start = time.perf_counter()
    try:
        await client.async_execute()
    except Exception as exc:  # kernel died, timed out, ...
        return Executed(name, notebook, time.perf_counter() - start, exc)
    return Executed(name, notebook, time.perf_counter() - start)


async def _execute_all() -> dict[str, Executed]:
    results = await asyncio.gather(*(_execute(name) for name in NAMES))
    return {result.name: result for result in results}


@pytest.fixture(scope="module")
def executed() -> dict[str, Executed]:
    """The notebooks, executed concurrently (about 30-60 s on 2 cores).

    In a thread of its own: Playwright's sync API (the browser tests' session fixture) keeps an
    event loop running in the main thread, where ``asyncio.run`` would refuse to start.
    """
    with (
        kernels_forward_native_output(),
        concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool,
    ):
        return pool.submit(asyncio.run, _execute_all()).result()


@pytest.fixture(params=NAMES, ids=[name.split("_")[0] for name in NAMES])
def run(request: pytest.FixtureRequest, executed: dict[str, Executed]) -> Executed:
    result = executed[request.param]
    if result.error is not None:
        pytest.fail(f"{result.name} did not finish: {type(result.error).__name__}: {result.error}")
    return result


def test_notebooks_are_committed_without_outputs() -> None:
    for name in NAMES:
        notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(notebook)
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type == "code":
                assert not cell.outputs, f"{name} cell {index} has saved outputs: clear them"
                assert cell.execution_count is None, f"{name} cell {index}: execution count"
        assert "widgets" not in notebook.metadata, f"{name} has saved widget state"


def test_every_cell_runs_without_error(run: Executed) -> None:
    errors = [
        f"cell {index}: {output.ename}: {output.evalue}"
        for index, cell in enumerate(run.notebook.cells)
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    assert not errors, f"{run.name}:\n" + "\n".join(errors)
    unrun = [
        index
        for index, cell in enumerate(run.notebook.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None
    ]
    assert not unrun, f"{run.name}: cells {unrun} did not run"


# A line of TensorFlow's C++ logging (absl): "I0000 00:00:1796088769.383736   29701 file.cc:150] ..."
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]", re.MULTILINE)


def test_no_tensorflow_logging_under_any_cell(run: Executed) -> None:
    """TF's start-up and placement logging goes into the panels' logs, not under the cells."""
    noisy = [
        f"cell {index}: {output.text.strip().splitlines()[0][:120]}"
        for index, cell in enumerate(run.notebook.cells)
        for output in cell.get("outputs", [])
        if output.output_type == "stream"
        and (TF_LOG_LINE.search(output.text) or "absl::InitializeLog" in output.text)
    ]
    assert not noisy, f"{run.name}:\n" + "\n".join(noisy)


def test_outputs_show_the_placement_panel(run: Executed) -> None:
    views = [
        output.data[WIDGET_VIEW]["model_id"]
        for cell in run.notebook.cells
        for output in cell.get("outputs", [])
        if output.output_type in ("execute_result", "display_data") and WIDGET_VIEW in output.data
    ]
    assert views, f"{run.name} displays no widget"
    state = run.notebook.metadata["widgets"][WIDGET_STATE]["state"]
    panels = [
        model_id
        for model_id in views
        if "tfplace-panel" in state.get(model_id, {}).get("state", {}).get("_dom_classes", [])
    ]
    assert panels, f"{run.name}: no displayed widget is a placement panel"


def test_executed_notebook_stays_within_its_size_budget(run: Executed) -> None:
    whole = len(nbformat.writes(run.notebook).encode())
    stripped = nbformat.from_dict(json.loads(nbformat.writes(run.notebook)))
    stripped.metadata.pop("widgets", None)
    without_state = len(nbformat.writes(stripped).encode())
    assert without_state <= MAX_BYTES_WITHOUT_WIDGET_STATE, (
        f"{run.name}: {without_state:,} bytes without widget state "
        f"(budget {MAX_BYTES_WITHOUT_WIDGET_STATE:,})"
    )
    assert whole <= MAX_BYTES, f"{run.name}: {whole:,} bytes executed (budget {MAX_BYTES:,})"
    state = run.notebook.metadata["widgets"][WIDGET_STATE]["state"]
    bundles = [
        model_id
        for model_id, model in state.items()
        if model["state"].get("_anywidget_id")
        == "tfplace_widget._widgets.bundle_holder.PlotlyBundle"
    ]
    assert len(bundles) == 1, f"{run.name}: plotly's bundle is in {len(bundles)} widgets"


# Facts each notebook's markdown relies on, as they appear in its text outputs. These hold on a
# machine without a GPU (two CPUs) and with one; FACTS_WITHOUT_GPU only with the CPU stand-in.
FACTS = {
    "01_seed_experiment.ipynb": [
        "how=implicit",  # A and B in inputs_none asked for nothing
        "(GPU before CPU)",  # ...and their reason states the priority rule
    ],
    "02_explicit_and_implicit.ipynb": [
        "/job:localhost/device:",  # nested scopes merge field by field
        "(a partial device spec)",
        "StringJoin: kernels for ['CPU']",
        "Cannot place op 'S'",  # the TraceError without soft placement...
        "Cannot assign a device for operation S",  # ...quoting TensorFlow's own message
        "ConfigProto().allow_soft_placement = False",  # a bare ConfigProto: soft placement off
        "eager context: tf.config.get_soft_device_placement() = True",
        "Session(): S ran on a device that works",  # no config: the eager context's, soft on
        "Session(config=ConfigProto()): Cannot assign a device for operation S",
        "colocation groups=[b'loc:@a']",
        "the same as a's: True",  # colocate_with gives b a's device, not its scope's /cpu:0
        "Built as AddV2; TensorFlow's graph optimizer turned it into Const.",
        # opt_level=L0 in a Session does not stop Grappler: it runs by default there too
        "Session at opt_level=L0, Grappler on by default: C ran as Const",
    ],
    "03_finding_one_op.ipynb": [
        "No op named 'c' in this trace. Close matches:",
        "copies: 3, bytes copied: 12,000,000",  # C away from its inputs
        "copies: 0, bytes copied: 0",  # C next to its inputs
        # What if: overrides= moves C away from its inputs; compare says what changed.
        "C after the override: how=explicit. Requested ",
        "through overrides ('C')",  # the reason names where the request came from
        "1 op moved: C (CPU:0 -> ",
        "3 transfers added (12.0 MB).",  # the three copies are back
        "only_b",  # ...listed as only in the second run
        "Step time: a ",  # the step time of each run
    ],
    "04_real_gpu_trace.ipynb": [
        "/job:localhost/replica:0/task:0/device:GPU:0    13",  # 13 ops on GPU:0, 1 on CPU:0
        "31 records in the file, 22 rows in trace.events",  # stream:all copies counted once
        "edge_22_MatMul",  # the MatMul result copied back to the host
        "edge_78__arg_Placeholder_0_0",  # a fed value copied to the GPU
    ],
    "05_tf2_functions_and_keras.ipynb": [
        "mode: function",  # a tf.function runs in the eager runtime
        "C: how=explicit, function=seed",  # tf.device inside the function
        "A: how=implicit, function=seed, asked for nothing",
        "(GPU before CPU)",  # ...and A's reason states the priority rule
        "PartitionedCall/double: function=scale, how=explicit",  # tf.device around the call
        "around the call PartitionedCall (of scale) applies to every op inside without one",
        "while/body/while/step: AddV2, runs=5",  # runs = the loop's trip count
        "forward pass only: weights unchanged: True",  # show_placement(model, x)
        "functions: ['one_step_on_data']",  # Keras's training step
        "optimizer steps taken by show_placement: 2",  # warmup + steps real steps
        "warmup=0: optimizer steps taken: 1",
        "function: ['train_step']",  # the GradientTape step
        "weight updates (AssignSubVariableOp): 4",  # SGD on 2 kernels + 2 biases
        "how='xla' for every op of the step: True",  # XLA's ops listed (issue 23)
        "the whole step runs as one XLA cluster",
        "gradient_tape/mlp_xla_1/dense_",  # a gradient MatMul and the instruction it went into
    ],
    "06_will_it_run_on_the_gpu.ipynb": [
        "int_matmul: MatMul, kernels=CPU, gpu_kernel=dtype",  # the kernel columns
        "report: StringFormat, kernels=CPU, gpu_kernel=no",
        "median: EagerPyFunc, kernels=CPU GPU, gpu_kernel=yes",  # a DEFAULT kernel
        "predicted on one GPU: int_matmul -> CPU:0",  # the replayed placer
        "predicted on one GPU: mlp_1/dense_1/MatMul -> GPU:0",
        "cpu_fallback (high): Cast to float32 before the MatMul (int_matmul): int32 MatMul has "
        "no GPU kernel",
        # made without a GPU, what the findings say about a GPU machine reads as a prediction
        "cpu_fallback (high): On a machine with a GPU, report (StringFormat) would run on the "
        "CPU: string ops have no GPU",
        "ping_pong (high): On a machine with a GPU, median (tf.py_function) would sit on GPU:0",
        "the step's reads of its tf.data input (IteratorGetNext) would run on the CPU",
        "bins -> int_matmul -> to_float would go GPU:0 -> CPU -> GPU:0",
        "after the fixes, traced: {'cpu_fallback': 0, 'ping_pong': 0, 'host_memory_on_gpu': 0}",
        "after the fixes, predicted on one GPU: {'cpu_fallback': 0, 'ping_pong': 0, "
        "'host_memory_on_gpu': 0}",
    ],
    "07_parameter_servers.ipynb": [
        # replica_device_setter deals the variables round-robin over 2 ps tasks, in creation
        # order; each read and update runs beside its variable
        "0. model/w1 -> /job:ps/task:0 (20,000 bytes); its reads and update: /job:ps/task:0, "
        "how=colocated",
        "1. model/b1 -> /job:ps/task:1 (200 bytes); its reads and update: /job:ps/task:1, "
        "how=colocated",
        "2. model/w2 -> /job:ps/task:0 (2,000 bytes)",
        "3. model/b2 -> /job:ps/task:1 (40 bytes)",
        "round-robin over the ps tasks",  # model/w1's reason names the setter's rule
        "resource/ref edge with model/w1",  # a read's reason: colocated with its variable
        "mean_grad_w1 (RealDiv) on /job:worker/task:0, how=implicit",  # no request: the chief
        # the cross-task bytes of one step, per pair of tasks
        "/job:ps/task:0 -> /job:worker/task:1: 22,000 bytes",  # w1 + w2, to each worker
        "/job:ps/task:1 -> /job:worker/task:1: 240 bytes",  # b1 + b2
        "/job:worker/task:0 -> /job:ps/task:0: 22,000 bytes",  # the mean gradients
        "/job:worker/task:1 -> /job:worker/task:0: 22,244 bytes",  # tower 1's gradients + loss
        "per ps task, sent + received: /job:ps/task:0 66,000, /job:ps/task:1 720",
        "'cross_task_transfer': ",  # trace.findings reports the traffic between tasks
        # fixed_size_partitioner(2): the parts are dealt out like variables
        "0. model/w1/part_0 -> /job:ps/task:0 (10,000 bytes)",
        "1. model/w1/part_1 -> /job:ps/task:1 (10,000 bytes)",
        "2. model/b1 -> /job:ps/task:0 (200 bytes)",
        "model/w1/ConcatPartitions/concat_1 (joins w1's parts) on /job:worker/task:1",
        "per ps task, sent + received: /job:ps/task:0 33,600, /job:ps/task:1 33,120",
        "model/b1 (/job:ps/task:1/CPU:0 -> /job:ps/task:0/CPU:0)",  # compare: b1 moved
        # the name model/w1 is now the Identity joining the parts: another op, not a move
        "model/w1 (VarHandleOp on /job:ps/task:0/CPU:0 -> Identity on /job:worker/task:0/CPU:0)",
        "/job:ps/task:1 -> /job:worker/task:0: 240 -> 11,040 bytes (+10,800)",
        "/job:worker/task:1 -> /job:worker/task:0: 22,244 -> 22,244 bytes (+0)",
        "all tasks, per step: 88,964 -> 88,964 bytes",  # the same bytes, on other links
        # TF2: the same model under MultiWorkerMirroredStrategy on two workers (mwms_train.py)
        "MultiWorkerMirroredStrategy replicates it (this is /job:worker/task:0's copy).",
        # the gradients' all-reduce: the four variables' 22,240 bytes, from each worker
        "Its input sgd_1/concat:0 is 22,240 bytes",
        "/job:worker/task:0 -> /job:worker/task:1: 22,244 bytes in 2 copies",  # + the loss
        "/job:worker/task:1 -> /job:worker/task:0: 22,244 bytes in 2 copies",
        "all tasks, per step: 44,488 bytes",
        # TF2: ParameterServerStrategy (ps_train.py): MinSizePartitioner splits w1 in two, and
        # the strategy deals variables and shards round-robin in creation order
        "sharded by MinSizePartitioner: w1 on /job:ps/task:0, /job:ps/task:1 (2 shards); b1 on "
        "/job:ps/task:0; w2 on /job:ps/task:1; b2 on /job:ps/task:0.",
        "/job:ps/task:1: Variable shard 2 of 2 of w1 (w1/part_1: [50, 50] float32, 10,000 bytes), "
        "placed on /job:ps/task:1 by the strategy's variable_partitioner (MinSizePartitioner)",
        "/job:ps/task:0: Variable b2 ([10] float32, 40 bytes), placed on /job:ps/task:0",
        # the worker's /device:CPU:0 is the strategy's request, not a tf.device of the user's
        "Requested /device:CPU:0 by ParameterServerStrategy, not by a tf.device of yours",
        "because the coordinator scheduled it there (ClusterCoordinator.schedule: call",
        # one step's reads and updates, per ps task
        "/job:ps/task:0 -> the worker: 10,240 bytes in 9 copies",
        "the worker -> /job:ps/task:0: 10,240 bytes in 3 copies",
        "/job:ps/task:1 -> the worker: 12,000 bytes in 6 copies",
        "the worker -> /job:ps/task:1: 12,000 bytes in 2 copies",
        "unbalanced_ps findings: 0",
        "overridden_request findings: 0",
        # cross_task_transfer names the variables and shards, and advises no partitioner
        "reads of the variables on /job:ps/task:0 (b2 (40 B), b1 (200 B), w1/part_0 (shard 1 of 2 "
        "of w1, 10.0 kB))",
        "(w1 already split over the ps tasks by MinSizePartitioner; b2, b1 whole, under 1.0 MB "
        "each). This is the strategy's parameter traffic",
    ],
    "09_memory.ipynb": [
        # TensorFlow's allocator records, read from graph mode's FULL_TRACE step_stats
        "allocator records on 2 devices",
        "peaks are the records' maxima: True",
        "held by:",
        # minimize() leaves the gradients unrequested: layer 2's lands on CPU:0
        "layer 2's gradient MatMul on CPU:0, how=implicit",
        "after colocate_gradients_with_ops=True: layer 2's gradient MatMul on CPU:1, how=colocated",
        "less: True",  # bytes CPU:0 allocates (its peak depends on the ops' order)
    ],
}


FACTS["08_from_finding_to_fix.ipynb"] = [
    # the seed's copies, each op's line, the fix with its edit at those lines, tried
    "0. costly_transfer (high): 2 copies from CPU:0 to ",
    " in inputs_cpu",  # the source column: the cell's line
    "around the lines that make them (In[",
    "verified: True (the finding is gone, copies 3 -> 1, outputs equal",
    "finding gone: True, copies 3 -> 1, outputs equal: True, TensorFlow's log agrees: True",
    "1 fix tried, 1 verified",  # suggest_placement, from the panel's button
    "copies: TensorFlow's placer 3, suggested 1",
    "the same as try_fix's run with the overrides: True",  # the edit made does what was tried
    "3 copies, more than max_copies=1; checked against the trace.",  # assert_placement
]

FACTS_WITHOUT_GPU = {
    "01_seed_experiment.ipynb": [
        "they ran on: /job:localhost/replica:0/task:0/device:CPU:0",  # not on the stand-in
        "an op with no inputs is placed with its consumers (C)",  # tiny Consts follow C
        "inputs_none, n = 10**6: copies: 3, bytes copied: 12,000,000",  # A, B in; C out
        "inputs_none, n = 10: copies: 1, bytes copied: 40",  # only C
    ],
    "02_explicit_and_implicit.ipynb": [
        "which does not exist here (devices: CPU:0, CPU:1); soft placement moved it to CPU:0.",
        "b in the trace: requested_device='/device:CPU:1', how=colocated",  # a's, not /cpu:0
        "optimize=True: copies: 1, bytes copied: 4,000,000",
    ],
    "03_finding_one_op.ipynb": [
        "1 op moved: C (CPU:0 -> CPU:1).",  # to the stand-in
    ],
    "08_from_finding_to_fix.ipynb": [
        "put A, B on CPU:1 with C: change the tf.device('/CPU:0') around the lines",
        "fixed: A on /job:localhost/replica:0/task:0/device:CPU:1, 1 copy",
    ],
    "05_tf2_functions_and_keras.ipynb": [
        "devices: /device:CPU:0, /device:CPU:1",  # two logical CPUs, set before start-up
        "C ran on /job:localhost/replica:0/task:0/device:CPU:1",  # on the stand-in
        "On a machine with a GPU and a GPU kernel for it, that is GPU:0.",  # A's reason
        "G: how=soft, asked for /device:GPU:0, ran on /job:localhost/replica:0/task:0/device:CPU:0",
        "soft placement is off, and the devices here are CPU:0, CPU:1",  # soft_placement=False
        "jit_compile='auto' picks False here",  # Keras 3: XLA only with a GPU
        "gradient_tape/mlp_xla_1/dense_2_1/MatMul/MatMul",  # an XLA-compiled gradient MatMul
    ],
}


@pytest.mark.parametrize("name", NAMES, ids=[name.split("_")[0] for name in NAMES])
def test_outputs_state_the_facts_the_text_explains(name: str, executed: dict) -> None:
    result = executed[name]
    assert result.error is None, f"{name} did not finish: {result.error}"
    text = result.text
    facts = list(FACTS[name])
    if "No GPU here" in executed[NAMES[0]].text:
        facts += FACTS_WITHOUT_GPU.get(name, [])
    missing = [fact for fact in facts if fact not in text]
    assert not missing, f"{name}: outputs lack {missing}"


# 04 reads a real GPU trace; 06 predicts a GPU machine instead of standing in for one; 07 runs
# on a cluster's CPU-only tasks; 09 is about two CPUs' memory, no GPU involved.
STAND_IN = [name for name in NAMES if not name.startswith(("04_", "06_", "07_", "09_"))]


@pytest.mark.parametrize("name", STAND_IN, ids=[name.split("_")[0] for name in STAND_IN])
def test_notebooks_say_what_stands_in_for_the_gpu(name: str, executed: dict) -> None:
    text = executed[name].text
    assert "No GPU here: a second CPU device stands in for the GPU" in text or (
        "A GPU is visible" in text
    )


# -- 05: TF2 code --------------------------------------------------------------------------------
TF2 = "05_tf2_functions_and_keras.ipynb"


def test_tf2_notebook_late_log_device_placement_prints_nothing(executed: dict) -> None:
    """The markdown says set_log_device_placement(True), called once the runtime runs, prints
    nothing, even for eager ops: the cell shows the function's result and not one line more."""
    result = executed[TF2]
    assert result.error is None, f"{TF2} did not finish: {result.error}"
    cells = [
        cell
        for cell in result.notebook.cells
        if cell.cell_type == "code" and "set_log_device_placement(True)" in cell.source
    ]
    assert len(cells) == 1, "one cell turns the placement log on"
    outputs = cells[0].outputs
    assert [(o.output_type, o.get("name")) for o in outputs] == [("stream", "stdout")], outputs
    assert outputs[0].text.strip() == "tf.Tensor([2. 2. 2.], shape=(3,), dtype=float32)"


def test_tf2_notebook_panels_say_they_ran_tf2_code(executed: dict) -> None:
    """Three panels (the seed function, the Keras forward pass, a training step), each headed
    as TF2 code run in the eager runtime."""
    result = executed[TF2]
    assert result.error is None, f"{TF2} did not finish: {result.error}"
    state = result.notebook.metadata["widgets"][WIDGET_STATE]["state"]
    headers = [
        model["state"]["value"]
        for model in state.values()
        if "TensorFlow placement</b>" in str(model["state"].get("value", ""))
    ]
    assert len(headers) == 3, headers
    assert all("TF2 code, run in the eager runtime" in header for header in headers), headers
    assert any("mlp.train_on_batch" in header for header in headers), headers


def test_tf2_notebook_names_the_function_of_every_op(executed: dict) -> None:
    text = executed[TF2].text
    assert "before: function=outer" in text and "after: function=outer" in text
