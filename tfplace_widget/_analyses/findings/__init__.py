"""What to fix: the ``findings`` of a trace, one row per problem, worst first.

Each finding names its ``kind``, a ``severity`` (``high``, ``medium``, ``info``), the ``ops``
it is about (so the panel can filter to them), a one-sentence ``message`` that says what to
change, and the numbers behind it (``evidence``). Pure pandas over what the trace already holds
(``ops``, ``events``, ``transfers``, ``inputs``, the graph facts and the kernel columns): no
TensorFlow session, no widget.

What can be known depends on the trace:

- a trace with the kernel columns (``gpu_kernel`` not ``"NA"``: traced here, with its graph)
  predicts where each op would run on a machine with one GPU, so a CPU-only trace already says
  which ops would fall back to the CPU there (``cpu_fallback``, ``ping_pong``,
  ``host_memory_on_gpu``): those findings are ``predicted`` (as are all of predict_placement's
  trace), come after the measured ones, and every view shows them under ``PREDICTED_HEADER``;
- a trace recorded on a GPU machine shows it: ops that ran on the CPU beside a GPU. Loaded
  without its graph, why is unknown, and the message says so instead of guessing;
- a merge of several runs (``GPU_timeline_03_merged_5_runs``) can list the same op on the GPU
  and on the CPU: such duplicated runs are detected (``merged_runs``), not reported as fallbacks;
- copies, soft placement, idle devices and XLA clusters need no graph;
- a cluster trace (``cluster=``) sends tensors between tasks over the network: those copies
  are ``cross_task_transfer`` findings (per pair of tasks), not ``costly_transfer`` ones, and
  the parameter servers' idleness is expected, not an ``idle_device``.

The rules live by family: ``fallbacks`` (cpu_fallback), ``placement`` (soft_move,
host_memory_on_gpu, merged_runs), ``costly`` (costly_transfer), ``transfers`` (ping_pong, cross_task_transfer) and
``timing`` (idle_device), ``ps`` (unbalanced_ps: one ps task of a ParameterServerStrategy serves much more than its share of the variables' bytes a step; overridden_request: a tf.device of the user's around a variable's creation that the strategy overrode), ``memory`` (gpu_memory: a prediction's step near or over a GPU's size; memory_peak: one op holds most of a device's peak; pinned_host_memory, input_memory; replicated_variables: a strategy's replicas each hold a copy of the variables), ``input`` (input_wait: the calls blocked in ``IteratorGetNext`` for a
material share of their time), ``xla`` (xla_time: where an XLA cluster's time went; xla_recompile: a cluster compiled again for new input shapes; xla_outside: ops auto-clustering left out; xla_hidden: clusters whose ops are not listed), over what ``context`` reads off the trace; here they are run, each
kind capped at ``MAX_PER_KIND`` and the frame built.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from ..._model.columns import FINDINGS_COLUMNS
from ..._model.gc_pause import paused_gc
from ..._model.trace import strategy_of
from .base import (
    KINDS,
    MAX_NAMED,
    SEVERITIES,
    Context,
    Finding,
    listed_ops,
)
from .catalogue import AUDIT_COLUMNS, KIND_RULES, LISTED, KindRule, audit, kind_table
from .costly import COSTLY_BYTES, COSTLY_US, TOP_TRANSFERS, find_costly_transfers
from .fallbacks import find_cpu_fallbacks
from .input import INPUT_SHARE, find_input_waits
from .material import MATERIAL_SHARE, judge, material
from .memory import (
    GPU_MEMORY_GIB,
    GPU_MEMORY_NEAR,
    PEAK_OP_BYTES,
    find_gpu_memory,
    find_input_memory,
    find_memory_peaks,
    find_pinned_host_memory,
    find_replicated_variables,
)
from .placement import (
    find_host_memory_on_gpu,
    find_merged_runs,
    find_soft_moves,
)
from .ps import (
    UNBALANCED_BYTES,
    UNBALANCED_SHARE,
    find_overridden_requests,
    find_unbalanced_ps,
)
from .tasks import is_split, merged, task_parts
from .timing import BUSY_SHARE, IDLE_SHARE, find_idle_devices
from .transfers import (
    NETWORK_HIGH_BYTES,
    NETWORK_MEDIUM_BYTES,
    find_cross_task_transfers,
    find_ping_pongs,
)
from .xla import find_xla_hidden, find_xla_outside, find_xla_recompile, find_xla_time

__all__ = [
    "AUDIT_COLUMNS",
    "KIND_RULES",
    "LISTED",
    "KindRule",
    "audit",
    "kind_table",
    "BUSY_SHARE",
    "COLUMNS",
    "COSTLY_BYTES",
    "COSTLY_US",
    "IDLE_SHARE",
    "GPU_MEMORY_GIB",
    "GPU_MEMORY_NEAR",
    "PEAK_OP_BYTES",
    "INPUT_SHARE",
    "KINDS",
    "MAX_NAMED",
    "MAX_PER_KIND",
    "MATERIAL_SHARE",
    "NETWORK_HIGH_BYTES",
    "NETWORK_MEDIUM_BYTES",
    "SEVERITIES",
    "TOP_TRANSFERS",
    "UNBALANCED_BYTES",
    "UNBALANCED_SHARE",
    "MEASURED_HEADER",
    "PREDICTED_HEADER",
    "PREDICTION_HEADER",
    "find_findings",
    "finding_groups",
    "group_header",
]

COLUMNS = FINDINGS_COLUMNS
MAX_PER_KIND = 8  # findings of one kind; the rest become one line

# The headers every view (panel, HTML report, ``tfplace show``, the static snapshot) shows the
# findings under: a CPU-only run's findings about a GPU machine read as the predictions they
# are, not as what this run did. The measured ones get theirs only when both groups exist.
MEASURED_HEADER = "Measured in this run"
PREDICTED_HEADER = "Predicted for a machine with a GPU (this run had none)"
PREDICTION_HEADER = "Predicted for a machine with a GPU (predict_placement's: nothing ran)"


def group_header(trace: Any, predicted: bool) -> str:
    """The header of ``trace``'s measured (``predicted=False``) or predicted findings."""
    if not predicted:
        return MEASURED_HEADER
    return PREDICTION_HEADER if getattr(trace, "predicted", False) else PREDICTED_HEADER


def finding_groups(findings: pd.DataFrame, trace: Any = None) -> list[tuple[str, pd.DataFrame]]:
    """``findings`` (a ``trace.findings`` frame) as the views show them: ``(header, rows)``
    per group, the measured ones first; the header is ``""`` for measured findings alone
    (nothing to tell apart). A frame without the ``predicted`` column (one made by hand, or
    read from an older file) is all measured. Rows keep their index: the finding's position."""
    if not len(findings):
        return []
    if "predicted" in findings:
        marked = findings["predicted"].fillna(False).astype(bool)
    else:
        marked = pd.Series(False, index=findings.index)
    measured, predicted = findings[~marked], findings[marked]
    if not len(predicted):
        return [("", measured)]
    groups = [(group_header(trace, False), measured)] if len(measured) else []
    return [*groups, (group_header(trace, True), predicted)]


def find_findings(trace: Any, immaterial: bool = False) -> pd.DataFrame:
    """The material findings of ``trace`` (a :class:`~tfplace_widget._model.trace.PlacementTrace`)
    as a DataFrame with ``COLUMNS``: those measured in this run first, then those ``predicted``
    for a machine with a GPU the trace did not run on, each group sorted by severity, then cost
    (time, then bytes, then op count).

    Material (``material.py``): what a finding is about takes at least ``MATERIAL_SHARE`` of
    the step's time (or of its bytes), in most traced steps; each finding's ``evidence`` has
    ``step_share``, ``steady_steps`` of ``traced_steps`` and ``material``. ``immaterial=True``
    lists the others too (``evidence["material"] == 0``), as ``trace.all_findings`` does.

    Empty (with those columns) when nothing is worth changing. Raises ``TypeError`` for an
    object without the trace's ``ops`` / ``events`` / ``transfers`` frames.
    """
    for name in ("ops", "events", "transfers", "devices"):
        if not hasattr(trace, name):
            raise TypeError(
                f"find_findings takes a PlacementTrace, not {type(trace).__name__} (it has no "
                f"{name!r}). Make one with trace_placement(...) or PlacementTrace.from_*()."
            )
    # the rules make hundreds of thousands of small objects (lookups, op lists, findings) and
    # no cycles: each generation-2 collection they set off walked every object of the kernel's
    # heap, TensorFlow's and the trace's (a fifth of the time at 100k ops)
    with paused_gc():
        return _find(trace, immaterial)


def _find(trace: Any, immaterial: bool) -> pd.DataFrame:
    if is_split(trace):  # a strategy's step on every task: each task's copy on its own
        per_task = [(task, _judged(part)) for task, part in task_parts(trace)]
        whole = Context.of(_the_calls_only(trace))
        across = find_cross_task_transfers(whole, NETWORK_HIGH_BYTES, NETWORK_MEDIUM_BYTES)
        across += find_unbalanced_ps(whole, UNBALANCED_SHARE, UNBALANCED_BYTES)
        across += find_overridden_requests(whole)
        found = merged(per_task, strategy_of(trace)) + judge(whole, across)
    else:  # immaterial findings may be left out early: no merge across tasks counts them
        found = _judged(trace, material_only=not immaterial)
    return _frame(_capped([f for f in found if immaterial or material(f)]))


def _judged(trace: Any, material_only: bool = False) -> list[Finding]:
    """Every rule's findings of ``trace``, each with its materiality in its evidence;
    ``material_only``: a rule may leave out findings that surely are not material."""
    context = Context.of(_the_calls_only(trace))
    context.material_only = material_only
    found: list[Finding] = []
    found += find_merged_runs(context)
    found += find_cpu_fallbacks(context)
    found += find_soft_moves(context)
    found += find_costly_transfers(context)
    # the package's thresholds, so that setting findings.NETWORK_*_BYTES takes effect
    found += find_cross_task_transfers(context, NETWORK_HIGH_BYTES, NETWORK_MEDIUM_BYTES)
    found += find_ping_pongs(context)
    found += find_host_memory_on_gpu(context)
    found += find_idle_devices(context)
    found += find_xla_hidden(context)
    found += find_xla_time(context)
    found += find_xla_recompile(context)
    found += find_xla_outside(context)
    found += find_input_waits(trace)  # reads the input pipeline's rows, which context leaves out
    # the package's sizes, so that setting findings.GPU_MEMORY_GIB / PEAK_OP_BYTES takes effect
    found += find_gpu_memory(trace, GPU_MEMORY_GIB)
    found += find_memory_peaks(trace, PEAK_OP_BYTES)
    found += find_pinned_host_memory(trace, PEAK_OP_BYTES)
    found += find_input_memory(trace, PEAK_OP_BYTES)
    found += find_replicated_variables(trace, PEAK_OP_BYTES)
    return judge(context, _one_per_copy(context, _as_keras_xla_would(trace, found)))


# Predicted kinds about ops placed one by one: inside an XLA cluster none of them arises.
_PER_OP_KINDS = frozenset({"cpu_fallback", "ping_pong", "host_memory_on_gpu", "costly_transfer"})
JIT_FALSE_ONLY = (
    " This holds only if the step runs with jit_compile=False: with Keras's default on a GPU "
    "(jit_compile='auto'), XLA compiles this step into one cluster on the GPU, and none of "
    "these ops is placed on its own (predict_placement(trace, gpus=1) shows it)."
)


def _as_keras_xla_would(trace: Any, found: list[Finding]) -> list[Finding]:
    """The predicted findings of a CPU-only trace of a Keras step made consistent with what
    Keras's XLA does on a GPU machine (``predict_placement``'s answer): a per-op finding about
    ops Keras would compile into one XLA cluster is dropped when the model asks for XLA or for
    Keras's unresolved default, and reads as what ``jit_compile=False`` would do (``info``)
    when this machine cannot tell its default from an explicit ``False``."""
    if getattr(trace, "predicted", False) or not any(f.predicted for f in found):
        return found
    from ..predict.keras_xla import xla_cluster_ops

    try:
        cluster, step_ops, certain = xla_cluster_ops(trace)
    except Exception:  # a damaged record must not cost the other findings
        return found
    if not cluster:
        return found
    outside = set(trace.ops["op"].astype(str)) - step_ops
    kept = []
    for finding in found:
        about_cluster = (
            finding.predicted
            and finding.kind in _PER_OP_KINDS
            and any(op in cluster for op in finding.ops)
            and not any(op in outside for op in finding.ops)
        )
        if not about_cluster:
            kept.append(finding)
        elif not certain:
            finding.severity = "info"
            finding.message += JIT_FALSE_ONLY
            finding.evidence["jit_compile_false_only"] = 1
            kept.append(finding)
    return kept


def _one_per_copy(context: Context, found: list[Finding]) -> list[Finding]:
    """One finding where the copies of a function (``fit``'s training and evaluation steps)
    have the same one: the first keeps its message, takes the copies' ops, and counts them
    (``function_copies``)."""
    kept: dict[tuple, Finding] = {}
    context.original("")  # builds context.copy_of: most traces have no copies
    copy_of = context.copy_of or {}

    # a finding with no other of its kind (measured or predicted) and, without copies, of its
    # op count (``Finding.ops`` names each op once) has none to merge with: no set of its ops
    # (a large trace's ping_pong and costly_transfer findings name hundreds of thousands)
    def group(finding: Finding) -> tuple:
        return (finding.kind, finding.predicted, -1 if copy_of else len(finding.ops))

    groups = Counter(map(group, found))
    for finding in found:
        if groups[group(finding)] == 1:
            kept[(id(finding),)] = finding
            continue
        ops = (copy_of.get(op, op) for op in finding.ops) if copy_of else finding.ops
        key = (finding.kind, finding.predicted, frozenset(ops))
        first = kept.get(key)
        if first is None:
            kept[key] = finding
            continue
        first.ops = list(dict.fromkeys([*first.ops, *finding.ops]))
        first.evidence["function_copies"] = int(first.evidence.get("function_copies", 1)) + 1
    return list(kept.values())


def _the_calls_only(trace: Any) -> Any:
    """``trace`` without the rows of its input pipeline (``input_stage`` set): tf.data runs
    its functions on the iterator's device by its own rule, so the step's findings (a CPU
    fallback, a transfer, an idle device) are not about them."""
    ops = trace.ops
    if "input_stage" not in ops or not ops["input_stage"].notna().any():
        return trace
    import copy

    pipeline = ops["input_stage"].notna()
    calls = copy.copy(trace)
    calls.ops = ops[~pipeline].reset_index(drop=True)
    events = trace.events
    calls.events = events[~events["op"].isin(set(ops["op"][pipeline]))].reset_index(drop=True)
    return calls


def _capped(found: list[Finding]) -> list[Finding]:
    """At most ``MAX_PER_KIND`` findings of one kind: the worst ones, then one line for the
    rest (a graph with thousands of pinned chains would bury everything else)."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    by_kind: dict[str, list[Finding]] = {}
    for finding in found:
        by_kind.setdefault(finding.kind, []).append(finding)
    kept: list[Finding] = []
    for kind, group in by_kind.items():
        if len(group) <= MAX_PER_KIND:
            kept += group
            continue
        group.sort(key=lambda f: (rank[f.severity], *(-c for c in f.cost)))
        head, rest = group[: MAX_PER_KIND - 1], group[MAX_PER_KIND - 1 :]
        ops = [op for f in rest for op in f.ops]
        distinct = len(set(ops))
        cost = tuple(sum(f.cost[i] for f in rest) for i in range(3))  # for the evidence
        kept += head
        kept.append(
            Finding(
                kind,
                min((f.severity for f in rest), key=rank.__getitem__),
                ops,
                (
                    f"{len(rest)} more {kind} findings over {distinct:,} ops "
                    f"({listed_ops(ops)}): their causes and fixes are those "
                    "of the findings above; click to see their ops."
                ),
                {"findings": len(rest), "ops": distinct, "duration_us": cost[0]},
                (-1.0, -1.0, -1.0),  # last of its severity: after the ones it summarises
                predicted=all(f.predicted for f in rest),
            )
        )
    return kept


def _frame(found: list[Finding]) -> pd.DataFrame:
    """The findings measured in this run first, then the predicted ones (``predicted``): each
    group worst first. The views show the groups in this order, under ``group_header``'s."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    found = sorted(
        found, key=lambda f: (f.predicted, rank[f.severity], *(-c for c in f.cost), f.kind)
    )
    frame = pd.DataFrame(
        {
            "kind": [f.kind for f in found],
            "severity": pd.Categorical(
                [f.severity for f in found], categories=list(SEVERITIES), ordered=True
            ),
            "ops": [f.ops for f in found],
            "message": [f.message for f in found],
            "evidence": [f.evidence for f in found],
            "predicted": pd.Series([f.predicted for f in found], dtype=bool),
            "fix": pd.Series([f.fix for f in found], dtype=object),
        },
        columns=COLUMNS,
    )
    frame["kind"] = frame["kind"].astype(object)
    frame["message"] = frame["message"].astype(object)
    return frame
