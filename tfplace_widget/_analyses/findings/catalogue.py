"""What each finding kind claims and how it is held to it: the cause it names and what that is
checked against, whether its fix is in the user's own code, and when it counts as material.

``KIND_RULES`` is the table (one ``KindRule`` per kind of ``FINDING_KINDS``); ``audit`` reads a
``trace.findings`` frame against it, one row per finding, for a table of every finding kind
against a corpus (cause checked? fix applicable? material?). A finding's own ``evidence`` may
say more than its kind: ``user_fix`` (1: the fix is a change in the user's code; 0: nothing in
it makes the cost, such as a distribution strategy's copies or a step's returned logs).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class KindRule:
    """What a finding kind claims and how it is held to it."""

    cause: str  # what the named cause is checked against ("" when the kind names none)
    user_fix: bool  # its fix is, by default, a change in the user's own code
    material: str  # when it is more than ``info`` (listed at all: ``LISTED``)


KIND_RULES: dict[str, KindRule] = {
    "cpu_fallback": KindRule(
        "kernel registry (gpu_kernel column, dtypes); requested_device (a tf.device is no "
        "fallback); resource groups of the graph",
        True,
        "known cause and copies to GPU neighbours: high; known cause or copies: medium; a "
        "tf.data iterator read: info",
    ),
    "soft_move": KindRule(
        "the placer's how/reason; the trace's devices; kernel registry", True, "asked for a GPU"
    ),
    "costly_transfer": KindRule(
        "the transfers of the partition graphs; resource inputs (variables vs tables vs "
        "iterators); host-memory kernels",
        True,
        "1 MB or 1 ms a step: high; 10 kB or 10 copies: medium; feeds, fetches and a "
        "strategy's copies: info (user_fix 0 for fetches and strategies)",
    ),
    "cross_task_transfer": KindRule(
        "the cluster's transfers and RecvTensor records", True, "1 MB a step: medium; 10 MB: high"
    ),
    "unbalanced_ps": KindRule(
        "the coordinator's record of ParameterServerStrategy's variables and shards (device, "
        "bytes, creation order, partitioner) and the cross-task transfers of one step",
        True,  # user_fix 0 where the partitioner that would balance it was not tried
        "one ps task serves 1.5x the mean of the ps tasks' bytes a step or more, and 1 MB a "
        "step or more: medium; 10 MB: high",
    ),
    "overridden_request": KindRule(
        "the user's tf.device scopes open around each variable's creation (recorded in the "
        "coordinator while the setup runs) against the device TensorFlow made the variable on",
        False,  # untried: no tf.device moves a variable under the strategy
        "always (medium): the request did not do what it says",
    ),
    "ping_pong": KindRule(
        "predicted devices and host-memory kernels (copies that leave device memory)",
        True,
        "two copies a step or more; a distribution strategy's own: info (user_fix 0)",
    ),
    "host_memory_on_gpu": KindRule(
        "kernel registry's host-memory GPU kernels; the float -> int cast the values come from "
        "(gradient code and TensorFlow's own integers are left out)",
        True,
        "only with tensors crossing device and host memory",
    ),
    "idle_device": KindRule(
        "the profiler's op times (runtime nodes left out)",
        True,
        "a device busy under 25% while another is over 50%, in steps of 1 ms or more, in "
        "most traced steps",
    ),
    "xla_hidden": KindRule("the profile's HLO records", False, "never (info)"),
    "xla_time": KindRule("the profile's HLO records", False, "never (info)"),
    "xla_recompile": KindRule(
        "the profile's compile events and program ids", True, "always (compiles in the steps)"
    ),
    "xla_outside": KindRule(
        "the auto-clustered graph's ops outside clusters", True, "a tf.py_function callback"
    ),
    "merged_runs": KindRule("op names on two device types", False, "never (info)"),
    "input_wait": KindRule(
        "the profile's IteratorGetNext waits and tf.data's function runs",
        False,  # the user's when the wait went to their dataset's functions (evidence)
        "waits of 50% of the calls' time or more, after the first wait too",
    ),
    "gpu_memory": KindRule(
        "the traced step's allocator records moved to the predicted devices, the predicted "
        "copies and the variables read (predict/memory.py)",
        True,
        "a prediction whose GPU peak reaches 90% of GPU_MEMORY_GIB (16 GiB): medium; over it: high",
    ),
    "memory_peak": KindRule(
        "TensorFlow's allocator records (trace.memory) or a prediction's memory",
        True,
        "one op holds over half a device's peak and at least 256 MiB",
    ),
    "pinned_host_memory": KindRule(
        "TensorFlow's gpu_host_bfc (TF 1.x: cuda_host_bfc) allocator records, or a prediction's copies off a GPU "
        "(predict/memory.py); the CPU readers' GPU kernels and requests",
        True,  # no_fix where a reader has no GPU kernel
        "a device's pinned host memory peaks at 256 MiB or more",
    ),
    "input_memory": KindRule(
        "IteratorGetNext's output bytes with no allocation record of the step (tf.data "
        "allocated them), live from its start to its last reader's end; a prediction's copy "
        "of them",
        True,
        "the batch is at least 256 MiB of a device's peak and more than the step's own tensors",
    ),
    "replicated_variables": KindRule(
        "what each replica device holds through the step (trace.memory's persistent rows: "
        "the captured variables' shapes and dtypes) on the devices of the strategy's "
        "replica_N scopes, the same sizes on every replica",
        False,  # the strategy's design: no_fix, user_fix 0
        "never (info): listed when each replica's copy is at least 256 MiB and a quarter of "
        "its device's need at the peak",
    ),
}

# When any finding is listed in ``trace.findings`` (material.py); the others are in
# ``trace.all_findings`` with ``evidence["material"] == 0``.
LISTED = (
    "what it names takes at least 1% of the step's op time (or of the bytes its ops output), "
    "in more than half the traced steps; a prediction's, of the step it was predicted from; "
    "merged_runs and xla_hidden always"
)

AUDIT_COLUMNS = ["kind", "severity", "predicted", "cause_checked", "user_fix", "material"]


def audit(findings: pd.DataFrame) -> pd.DataFrame:
    """One row per finding of ``findings`` (a ``trace.findings`` frame): its kind, severity,
    whether it is ``predicted``, what its cause is checked against (``cause_checked``),
    whether its fix is in the user's code (``user_fix``: the finding's evidence, else its
    kind's rule) and whether it is ``material`` (listed, ``evidence["material"]``, and more
    than ``info``)."""
    rows = []
    for row in findings.itertuples(index=False):
        rule = KIND_RULES[row.kind]
        evidence = row.evidence if isinstance(row.evidence, dict) else {}
        user_fix = bool(evidence.get("user_fix", int(rule.user_fix)))
        predicted = bool(getattr(row, "predicted", False))
        listed = bool(evidence.get("material", 1))
        material = listed and row.severity != "info"
        rows.append((row.kind, str(row.severity), predicted, rule.cause, user_fix, material))
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS)


def kind_table() -> pd.DataFrame:
    """Every finding kind with what its cause is checked against, whether its fix is in user
    code by default, and its materiality rule."""
    return pd.DataFrame(
        [(kind, r.cause, r.user_fix, r.material) for kind, r in KIND_RULES.items()],
        columns=["kind", "cause_checked", "user_fix", "material"],
    )
